"""How far inspect's decode prediction is from what was measured on SageMaker GPUs.

The known measurements are the source article's (Gemma 4 E2B, vLLM 0.30.0 on one ml.g6.xlarge
L4: bf16 51.3 and QAT w4a16 105.1 decode tokens/s) and its author's T4 article (ml.g4dn: QAT
decodes 1.79 times as fast as bf16). The bytes a token reads are what the same author computed
from the two real headers (bf16 4.597 GB, QAT 1.862 GB). The error is computed here, with the
same ceiling `recommend` ranks by, never typed in.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sagemeter.inspect.gpus import find_gpu

# GB read per decoded token, from the real headers (docs/inspect.md "How close it comes").
BYTES_PER_TOKEN = {"bf16": 4.597e9, "QAT w4a16": 1.862e9}
ARTICLE = "the source article (vLLM 0.30.0, ml.g6.xlarge, us-east-2)"
T4_ARTICLE = "the author's T4 article (vLLM bench)"


class KnownError(BaseModel):
    """One known measurement beside the prediction for it."""

    what: str
    gpu: str
    predicted: float
    measured: float
    measured_share: float = Field(description="measured / predicted")
    error_percent: float = Field(description="(predicted - measured) / measured, in percent")
    source: str


def _error(what: str, gpu: str, predicted: float, measured: float, source: str) -> KnownError:
    return KnownError(
        what=what,
        gpu=gpu,
        predicted=round(predicted, 2),
        measured=measured,
        measured_share=round(measured / predicted, 3),
        error_percent=round((predicted - measured) / measured * 100, 1),
        source=source,
    )


def ceiling(gpu: str, bytes_per_token: float) -> float:
    """Decode tokens/s at one request: the GPU's bandwidth / the bytes a token reads."""
    return find_gpu(gpu).gb_per_s * 1e9 / bytes_per_token


def known_errors() -> list[KnownError]:
    """The prediction against every known measurement: L4 decode of both checkpoints, and the
    T4's QAT/bf16 ratio (a ratio of ceilings does not depend on the bandwidth)."""
    measured_l4 = {"bf16": 51.3, "QAT w4a16": 105.1}
    rows = [
        _error(
            f"{name} decode tokens/s", "L4", ceiling("L4", BYTES_PER_TOKEN[name]), value, ARTICLE
        )
        for name, value in measured_l4.items()
    ]
    ratio = ceiling("T4", BYTES_PER_TOKEN["QAT w4a16"]) / ceiling("T4", BYTES_PER_TOKEN["bf16"])
    rows.append(_error("QAT / bf16 decode ratio", "T4", ratio, 1.79, T4_ARTICLE))
    return rows


def measured_share_range() -> tuple[float, float]:
    """The lowest and highest share of the ceiling the known decode measurements reached."""
    shares = [row.measured_share for row in known_errors() if "tokens/s" in row.what]
    return min(shares), max(shares)


def error_lines() -> list[str]:
    """The known errors in words, as `recommend` prints them and the README states them."""
    lines = []
    for row in known_errors():
        lines.append(
            f"{row.gpu} {row.what}: predicted {row.predicted:g}, measured {row.measured:g} "
            f"({row.measured_share:.0%} of the prediction; the prediction is "
            f"{row.error_percent:+.0f}% off) [{row.source}]"
        )
    return lines
