"""Checkpoint facts beside measured results: what a result's environment carries, and the
comparison row that puts the predicted decode ratio beside the measured one.
"""

from __future__ import annotations

from sagemeter.results.checkpoint_facts import CheckpointFacts

# Tokens per GB of weights read: the decode ceiling in tokens/s per GB/s of memory bandwidth.
# Its ratio between two results is the predicted decode ratio.
PREDICTED_KEY = "predicted_decode_tokens_per_gb"
PREDICTED_TITLE = "Predicted decode (tokens per GB read)"


def tokens_per_gb_read(facts: CheckpointFacts | None) -> float | None:
    """1e9 / bytes per decoded token, or None without facts."""
    if facts is None or facts.decode.bytes_per_token <= 0:
        return None
    return 1e9 / facts.decode.bytes_per_token
