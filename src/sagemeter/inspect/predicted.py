"""Checkpoint facts beside measured results: what a result's environment carries, and the
comparison row that puts the predicted decode ratio beside the measured one (declared with the
figures: `sagemeter.figures.builtin.PREDICTED`).
"""

from __future__ import annotations

from sagemeter.figures.builtin import PREDICTED, tokens_per_gb_read

# Tokens per GB of weights read: the decode ceiling in tokens/s per GB/s of memory bandwidth.
# Its ratio between two results is the predicted decode ratio.
PREDICTED_KEY = PREDICTED.key
PREDICTED_TITLE = PREDICTED.label

__all__ = ["PREDICTED_KEY", "PREDICTED_TITLE", "tokens_per_gb_read"]
