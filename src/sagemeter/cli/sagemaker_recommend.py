"""`sagemeter sagemaker recommend CHECKPOINT`: which instance type to measure on, before paying.

Thin: checks every option before any work, calls `sagemaker.recommend`, draws the ranking, the
types left out with why, and the prediction's known error; `--plan` writes a plan of the top K.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from sagemeter.atomic import check_output_file
from sagemeter.cli.recommend_plan import write_plan
from sagemeter.cli.sagemaker import _aws, _out, guarded
from sagemeter.errors import UserError
from sagemeter.printable import printable_json
from sagemeter.sagemaker.known_decode import error_lines
from sagemeter.sagemaker.recommend import (
    Candidate,
    Recommendation,
    check_options,
    parse_checkpoint,
    recommend,
)
from sagemeter.sagemaker.spec import DEFAULT_MAX_MODEL_LEN

DEFAULT_TOP = 5


def _gb(value: float | None) -> str:
    return "?" if value is None else f"{value / 1e9:.1f}"


def _money(value: float | None, digits: int = 2) -> str:
    return "?" if value is None else f"${value:,.{digits}f}"


def _quota(candidate: Candidate) -> str:
    offer = next((o for o in candidate.regions if o.region == candidate.region), None)
    if offer is None or offer.quota is None:
        return "?"
    used = "?" if offer.in_use is None else str(offer.in_use)
    return f"{used}/{offer.quota:g}"


def _ranking(recommendation: Recommendation, top: int) -> Table:
    c = recommendation.concurrency
    table = Table(
        title=f"{escape(recommendation.checkpoint)}: the top {top} by predicted $/M tokens"
    )
    columns = (
        "#", "instance type", "GPUs", "GB needed / budget", "decode tok/s (ceiling)",
        "likely tok/s", "region", "$/hour", "$/M at 1", *([f"$/M at {c}"] if c > 1 else []),
        "quota used/limit",
    )  # fmt: skip
    for column in columns:
        table.add_column(
            column, justify="left" if column in ("instance type", "region") else "right"
        )
    for candidate in recommendation.ranked[:top]:
        likely = candidate.likely_decode_tokens_per_second
        table.add_row(
            str(candidate.rank),
            candidate.instance_type,
            f"{candidate.gpus}× {candidate.gpu}",
            f"{_gb(candidate.needed_bytes)} / {_gb(candidate.memory_budget_bytes)}",
            f"{candidate.decode_tokens_per_second:,.1f}"
            if candidate.decode_tokens_per_second
            else "?",
            f"{likely[0]:,.0f}–{likely[1]:,.0f}" if likely else "?",
            candidate.region or "?",
            _money(candidate.usd_per_hour, 4),
            _money(candidate.usd_per_million_tokens_one),
            *([_money(candidate.usd_per_million_tokens)] if c > 1 else []),
            _quota(candidate),
        )
    return table


def _print(recommendation: Recommendation, top: int) -> None:
    out = _out()
    weights = recommendation.weights_bytes / 1e9
    read = recommendation.decode_bytes_per_token / 1e9
    kv = recommendation.kv_cache
    kv_text = (
        f"KV cache {kv.bytes_per_token:,} bytes per token ({kv.layers} layers × {kv.kv_heads} KV "
        f"heads × {kv.head_dim} × 2 × {kv.dtype_bytes} bytes)"
        if kv
        else f"KV cache unknown: {recommendation.kv_cache_note}"
    )
    out.print(
        f"{escape(recommendation.checkpoint)}: weights {weights:.3f} GB, "
        f"{read:.3f} GB read per decoded token; {escape(kv_text)}; "
        f"{recommendation.concurrency} at once × {recommendation.max_model_len:,} tokens, "
        f"{recommendation.gpu_memory_utilization:.0%} of GPU memory; regions "
        f"{', '.join(recommendation.regions)}"
    )
    out.print(_ranking(recommendation, top))
    unranked = [c for c in recommendation.candidates if c.rank is None]
    if unranked:
        out.print(f"Not ranked ({len(unranked)}):")
        for candidate in unranked:
            out.print(f"  {candidate.instance_type}: {escape(candidate.why_not or '?')}")
    for candidate in recommendation.ranked[:top]:
        for offer in candidate.regions:
            if offer.note and offer.region == candidate.region:
                out.print(
                    f"  note: {candidate.instance_type} in {offer.region}: {escape(offer.note)}"
                )
    for note in recommendation.notes:
        out.print(f"note: {escape(note)}")
    out.print("The prediction against known measurements:")
    for line in error_lines():
        out.print(f"  {escape(line)}")


@guarded
def recommend_command(
    checkpoint: Annotated[
        str, typer.Argument(help="a Hub model id (ORG/NAME, hf:ORG/NAME@REV) or a local folder")
    ],
    region: Annotated[
        list[str] | None,
        typer.Option(
            "--region",
            "-r",
            help="repeatable; default: the configured region, us-east-1, us-east-2, us-west-2",
        ),
    ] = None,
    max_model_len: Annotated[
        int, typer.Option(help="tokens of context per request the KV cache must hold")
    ] = DEFAULT_MAX_MODEL_LEN,
    concurrency: Annotated[int, typer.Option(help="requests at once, each max-model-len")] = 1,
    top: Annotated[int, typer.Option(help="how many ranked types to show and plan")] = DEFAULT_TOP,
    plan: Annotated[
        Path | None, typer.Option(help="write a plan that measures the top K (sagemeter run)")
    ] = None,
    force: Annotated[bool, typer.Option(help="replace an existing --plan file")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="the whole answer as JSON")] = False,
) -> None:
    """Rank the real-time GPU instance types for a checkpoint: fit, predicted decode, $/M tokens,
    quota."""
    check_options(region or [], max_model_len, concurrency, top)
    if plan is not None:
        if top < 2:
            raise UserError(f"--plan with --top {top}: a plan compares at least two instance types")
        # a Hub id, or a local folder (refused below): never the output either way
        check_output_file(plan, "--plan", force=force, inputs=[Path(checkpoint)])
    parsed = parse_checkpoint(checkpoint)
    if plan is not None and parsed.hub is None:
        raise UserError(
            "--plan needs a Hub model id: SageMaker's vLLM container downloads the model from "
            "the Hub, and a local folder cannot be deployed"
        )
    recommendation = recommend(
        parsed,
        regions=region or None,
        max_model_len=max_model_len,
        concurrency=concurrency,
        aws=_aws(),
    )
    if json_output:
        typer.echo(printable_json(recommendation.model_dump_json(indent=2)))
    else:
        _print(recommendation, top)
    if plan is not None:
        write_plan(recommendation, top, plan)
        if not json_output:
            shown = escape(str(plan))
            _out().print(f"wrote {shown}: check it with `sagemeter run {shown} --dry-run`")
