"""`sagemeter fidelity collect|compare`: token-level fidelity from the command line (thin: the
work is `collect_fidelity` and `compare_fidelity`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sagemeter import signal_wakeup
from sagemeter.errors import UserError
from sagemeter.printable import printable
from sagemeter.redaction import redact_tree

if TYPE_CHECKING:
    from sagemeter.results.fidelity_record import FidelityRecord

fidelity_app = typer.Typer(
    name="fidelity",
    help="Token-level fidelity: top-token agreement and KL against a reference, from logprobs.",
    no_args_is_help=True,
)


async def _collect_on(
    target_text: str,
    prompts: list[str],
    *,
    top_k: int,
    max_tokens: int,
    reference: FidelityRecord | None,
    engine: str | None,
    system_prompt: str | None,
) -> FidelityRecord:
    """Collect on `target_text`'s own HTTP API; a `local:` checkpoint is started and stopped by
    the same code every measurement uses (`open_endpoint`)."""
    from sagemeter.engines.endpoints import check_target, open_endpoint
    from sagemeter.fidelity.collect import collect_fidelity
    from sagemeter.targets import SageMakerTarget, parse_target

    target = parse_target(target_text)
    if isinstance(target, SageMakerTarget):
        raise UserError(
            f"{target_text}: fidelity needs the server's own HTTP API (llama.cpp or vLLM); "
            "SageMaker endpoints are not supported yet (see docs/fidelity.md)"
        )
    check_target(target)
    async with open_endpoint(target, concurrency=1, max_reply_tokens=max_tokens) as endpoint:
        assert endpoint.http_root is not None  # every target but SageMaker's has one
        record = await collect_fidelity(
            endpoint.http_root,
            prompts,
            top_k=top_k,
            max_tokens=max_tokens,
            reference=reference,
            engine=engine,
            system_prompt=system_prompt,
        )
        record.vocabulary = await asyncio.to_thread(endpoint.vocabulary)
        return record


@fidelity_app.command("collect")
def collect_command(
    out: Annotated[Path, typer.Argument(help="the record to write (JSON)", show_default=False)],
    target: Annotated[
        str,
        typer.Argument(
            help="http://HOST:PORT, local:CHECKPOINT or vllm:CHECKPOINT", show_default=False
        ),
    ],
    reference: Annotated[
        Path | None, typer.Option(help="A's record: force along its answers (measuring B or A')")
    ] = None,
    questions: Annotated[
        str, typer.Option(help="question set whose prompts are used (without --reference)")
    ] = "article-40",
    limit: Annotated[int | None, typer.Option(min=1, help="only the first N prompts")] = None,
    top_k: Annotated[int, typer.Option(min=1, help="top-k logprobs per position")] = 5,
    max_tokens: Annotated[int, typer.Option(min=1, help="answer tokens per prompt")] = 16,
    engine: Annotated[
        str | None, typer.Option(help="llamacpp or vllm [asked of the server]")
    ] = None,
    system_prompt: Annotated[str | None, typer.Option(help="system message")] = None,
    force: Annotated[bool, typer.Option(help="replace OUT if it already exists")] = False,
) -> None:
    """Record one endpoint's top-k next-token distributions along greedy (or A's) answers."""
    from sagemeter.atomic import check_output_file
    from sagemeter.fidelity.records import load_record, save_record
    from sagemeter.filekinds import FIDELITY_RECORD
    from sagemeter.limits import Tokens, TopK, checked
    from sagemeter.targets import input_paths

    checked(top_k, TopK, "--top-k")
    checked(max_tokens, Tokens, "--max-tokens")
    given = [reference] if reference else []
    given += [Path(questions)] if Path(questions).suffix else []  # a file, not a set's name
    given += input_paths(target)
    check_output_file(out, "OUT", force=force, inputs=given, kind=FIDELITY_RECORD)
    reference_record = load_record(reference) if reference else None
    if reference_record is not None:
        prompts: list[str] = []
        if limit is not None:
            raise UserError("--limit is for a new reference; a forced record keeps A's prompts")
    else:
        from sagemeter.questions import load_question_set

        prompts = [q.prompt for q in load_question_set(questions).questions][:limit]
    record = signal_wakeup.run(
        _collect_on(
            target,
            prompts,
            top_k=top_k,
            max_tokens=max_tokens,
            reference=reference_record,
            engine=engine,
            system_prompt=system_prompt,
        )
    )
    save_record(out, record)
    positions = sum(len(p.positions) for p in record.prompts)
    typer.echo(
        f"wrote {out}: {len(record.prompts)} prompts, {positions} positions ({record.engine})"
    )


@fidelity_app.command("compare")
def compare_command(
    a: Annotated[Path, typer.Argument(help="A's record (the reference)", show_default=False)],
    b: Annotated[Path, typer.Argument(help="B's record, forced along A", show_default=False)],
    floor: Annotated[Path | None, typer.Option(help="A' record (A again), the noise floor")] = None,
    out: Annotated[Path | None, typer.Option(help="also write the comparison as JSON")] = None,
    force: Annotated[bool, typer.Option(help="replace --out if it already exists")] = False,
) -> None:
    """Compare B (and A') against A: top-token agreement, KL(A‖B), first divergences."""
    from sagemeter.atomic import check_output_file, write_text_atomic
    from sagemeter.fidelity.compare import compare_fidelity, summary_lines
    from sagemeter.fidelity.records import load_record

    if out is not None:
        given = [a, b] + ([floor] if floor else [])
        from sagemeter.filekinds import FIDELITY_COMPARISON

        check_output_file(out, "--out", force=force, inputs=given, kind=FIDELITY_COMPARISON)
    comparison = compare_fidelity(
        load_record(a), load_record(b), load_record(floor) if floor else None
    )
    for line in summary_lines(comparison):  # names from record files: shown escaped
        typer.echo(printable(line))
    if out is not None:
        payload = redact_tree(comparison.model_dump(mode="json"))
        write_text_atomic(out, json.dumps(payload, indent=1) + "\n")
        typer.echo(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Add `sagemeter fidelity collect|compare` to the main app."""
    app.add_typer(fidelity_app)
