"""The plan that measures `recommend`'s top instance types: one SageMaker arm per type, the same
model on each, in its cheapest usable region with the other usable ones as fallbacks.

Checked with the plan loader before it is written, so a file that `sagemeter run` would refuse
is never left behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sagemeter.atomic import write_text_atomic
from sagemeter.errors import UserError
from sagemeter.experiment.plan import parse_plan
from sagemeter.experiment.plan_toml import plan_toml
from sagemeter.results.predicted_decode import PredictedDecode
from sagemeter.sagemaker.recommend import Candidate, Recommendation, plan_name_for

TENSOR_PARALLEL_KEY = "SM_VLLM_TENSOR_PARALLEL_SIZE"
REVISION_KEY = "SM_VLLM_REVISION"


def plan_data(recommendation: Recommendation, top: int) -> dict[str, Any]:
    """Plan data (as `sagemeter run` reads it) for the `top` ranked instance types."""
    if recommendation.model_id is None:
        raise UserError(
            "--plan needs a Hub model id: SageMaker's vLLM container downloads the model from "
            "the Hub, and a local folder cannot be deployed"
        )
    chosen = recommendation.ranked[:top]
    if len(chosen) < 2:
        raise UserError(
            f"--plan: {len(chosen)} instance type(s) ranked, and a plan compares at least two; "
            "add --region or lower --concurrency / --max-model-len"
        )
    levels = sorted({1, 4, 16, recommendation.concurrency})
    arms = []
    for candidate in chosen:
        env: dict[str, str] = {}
        if candidate.gpus > 1:
            env[TENSOR_PARALLEL_KEY] = str(candidate.gpus)
        if recommendation.revision:
            env[REVISION_KEY] = recommendation.revision
        fallbacks = [
            offer.region
            for offer in candidate.regions
            if offer.usable and offer.region != candidate.region
        ]
        sagemaker: dict[str, Any] = {
            "model": recommendation.model_id,
            "instance_type": candidate.instance_type,
            "region": candidate.region,
            "max_model_len": recommendation.max_model_len,
            "gpu_memory_utilization": recommendation.gpu_memory_utilization,
        }
        if fallbacks:
            sagemaker["fallback_regions"] = fallbacks
        if env:
            sagemaker["env"] = env
        if candidate.decode_tokens_per_second is not None:
            sagemaker["predicted_decode"] = _predicted(recommendation, candidate)
        arms.append({"name": candidate.instance_type.removeprefix("ml."), "sagemaker": sagemaker})
    return {
        "name": plan_name_for(recommendation.model_id),
        "measure": {"levels": levels},
        "arm": arms,
    }


def _predicted(recommendation: Recommendation, candidate: Candidate) -> dict[str, Any]:
    """The arm's prediction, checked as the plan loader will read it; the run copies it into
    the result, so the report compares without reading the checkpoint again."""
    assert candidate.decode_tokens_per_second is not None
    predicted = PredictedDecode(
        instance_type=candidate.instance_type,
        ceiling_tokens_per_second=candidate.decode_tokens_per_second,
        likely_tokens_per_second=candidate.likely_decode_tokens_per_second,
        decode_bytes_per_token=recommendation.decode_bytes_per_token,
    )
    return predicted.model_dump(exclude_none=True)


def write_plan(recommendation: Recommendation, top: int, path: Path) -> str:
    """Write the plan to `path` (checked by the plan loader first); returns its text."""
    data = plan_data(recommendation, top)
    lines = [
        f"Measures the {len(data['arm'])} instance types `sagemeter sagemaker recommend` ranked "
        f"first for {recommendation.checkpoint}",
        f"(max_model_len {recommendation.max_model_len}, {recommendation.concurrency} at once), "
        "by predicted $/M tokens:",
    ]
    for arm, candidate in zip(data["arm"], recommendation.ranked, strict=False):
        lines.append(
            f"  {arm['name']}: predicted decode ceiling {candidate.decode_tokens_per_second} "
            f"tokens/s, ${candidate.usd_per_million_tokens_one:.2f}/M at one request in "
            f"{candidate.region}"
        )
    lines.append("Check it with `sagemeter run PLAN --dry-run` (time, cost, quota) first.")
    text = plan_toml(data, "\n".join(lines))
    parse_plan(text, str(path))  # the loader's own check: never write what it refuses
    write_text_atomic(path, text)
    return text
