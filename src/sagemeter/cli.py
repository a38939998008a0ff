"""The command line: thin verbs over the library (the MCP server calls the same functions)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from sagemeter.errors import UserError

if TYPE_CHECKING:
    from sagemeter.fidelity.records import FidelityRecord
    from sagemeter.results import MeasureResult, StartupFacts
    from sagemeter.settings import MeasureSettings
    from sagemeter.targets import Target

app = typer.Typer(
    name="sagemeter",
    help="Deploy, measure, compare and tear down LLM checkpoints.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def new_progress(unit: str = "requests", transient: bool = False) -> Progress:
    """A progress bar on stderr; `transient` ones vanish when done (the result says the rest)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        console=err_console,
        transient=transient,
    )


def _parse_levels(text: str) -> list[int]:
    parts = [part.strip() for part in text.split(",")]
    try:
        levels = [int(part) for part in parts]
    except ValueError:
        raise UserError(
            f"--levels {text!r}: give whole numbers separated by commas, e.g. 1,4,16"
        ) from None
    if not levels or any(level <= 0 for level in levels):
        raise UserError(f"--levels {text!r}: every level must be a positive whole number")
    return levels


@app.command()
def checkpoints(
    prepare: Annotated[
        bool, typer.Option(help="derive the 32-bit checkpoint now if missing")
    ] = False,
) -> None:
    """List the embedded engine's checkpoints with file size and bits per weight."""
    from sagemeter.checkpoints import resolve_checkpoint
    from sagemeter.verbs import checkpoint_rows

    if prepare:
        with new_progress("tensors") as bar:
            task = bar.add_task("deriving smollm2-f32", total=None)
            resolve_checkpoint(
                "smollm2-f32",
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
    table = Table(title="embedded-engine checkpoints (use as local:NAME)")
    for column in ("name", "storage", "size MiB", "bits/weight", "parameters", "file"):
        numeric = column in ("size MiB", "bits/weight", "parameters")
        table.add_column(column, justify="right" if numeric else "left")
    for row in checkpoint_rows():
        if not row.available:
            table.add_row(row.name, row.storage, "-", "-", "-", f"{row.note} (or --prepare)")
            continue
        table.add_row(
            row.name,
            row.storage,
            f"{row.size_mib:.1f}",
            f"{row.bits_per_weight:.2f}",
            f"{(row.parameters or 0) / 1e6:.1f} M",
            row.path,
        )
    console.print(table)


@app.command()
def serve(
    target: Annotated[str, typer.Argument(help="local:CHECKPOINT or vllm:CHECKPOINT")],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="port on 127.0.0.1 (0 picks a free one)")
    ] = 8080,
    parallel: Annotated[
        int, typer.Option(min=1, max=512, help="parallel slots (embedded engine)")
    ] = 16,
) -> None:
    """Run the embedded engine or vLLM in the foreground for your own tools, until Ctrl-C."""
    from sagemeter.backends.local import LocalEngine
    from sagemeter.checkpoints import resolve_checkpoint
    from sagemeter.targets import LocalTarget, VllmTarget, parse_target

    parsed = parse_target(target)
    if isinstance(parsed, VllmTarget):
        from sagemeter.cli_engines import serve_vllm

        serve_vllm(parsed, port)
        return
    if not isinstance(parsed, LocalTarget):
        raise UserError(
            f"serve runs a local engine only; give local:CHECKPOINT or vllm:CHECKPOINT, "
            f"not {target!r}"
        )
    checkpoint = resolve_checkpoint(parsed.checkpoint)
    engine = LocalEngine(checkpoint, parallel=parallel, port=port)
    with err_console.status(f"starting {checkpoint.name}"):
        engine.start()
    try:
        console.print(
            f"serving {checkpoint.name} at [bold]{engine.base_url}[/] (OpenAI-compatible)"
        )
        console.print(f"engine log: {engine.log_path}; Ctrl-C stops it")
        while engine.is_running():
            time.sleep(0.5)
        raise UserError(f"the engine stopped unexpectedly; see {engine.log_path}")
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        engine.stop()


def _settings(
    quick: bool,
    short_tokens: int | None,
    long_tokens: int | None,
    repeats: int | None,
    levels: str | None,
    load_tokens: int | None,
    batches: int | None,
    questions: str | None,
    quality_max_tokens: int | None,
    questions_per_family: int | None = None,
    margin: float | None = None,
    fidelity: int | None = None,
    timeout: str | None = None,
    stall: str | None = None,
    retries: int | None = None,
    reruns: int | None = None,
    method: str | None = None,
) -> MeasureSettings:
    from sagemeter.calibrate.timing import parse_duration
    from sagemeter.verbs import measure_settings

    overrides = {
        "short_tokens": short_tokens,
        "long_tokens": long_tokens,
        "decode_repeats": repeats,
        "load_levels": _parse_levels(levels) if levels else None,
        "load_max_tokens": load_tokens,
        "load_batches": batches,
        "questions": questions,
        "quality_max_tokens": quality_max_tokens,
        "questions_per_family": questions_per_family,
        "margin_points": margin,
        "fidelity_prompts": fidelity,
        "timeout_s": parse_duration(timeout, "--timeout") if timeout is not None else None,
        "stall_s": parse_duration(stall, "--stall") if stall is not None else None,
        "retries": retries,
        "batch_reruns": reruns,
    }
    return measure_settings(quick, overrides, method=method)


@app.command()
def measure(
    out_dir: Annotated[Path, typer.Argument(help="folder for measure-NAME.json")],
    target: Annotated[
        str,
        typer.Argument(help="http://HOST:PORT, local:CHECKPOINT, vllm:CHECKPOINT or NAME@REGION"),
    ],
    name: Annotated[str | None, typer.Option(help="result name (default: from the target)")] = None,
    quick: Annotated[bool, typer.Option(help="shrink everything, for smoke tests")] = False,
    method: Annotated[
        str | None,
        typer.Option(
            help="sagemeter (ours) or article: the source article's exact method (one prompt, "
            "64-token answers, no seed, median of batch rates, 12 s pauses, its scoring rule) "
            "[sagemeter]"
        ),
    ] = None,
    short_tokens: Annotated[
        int | None, typer.Option(help="decode: short reply length [16]")
    ] = None,
    long_tokens: Annotated[int | None, typer.Option(help="decode: long reply length [512]")] = None,
    repeats: Annotated[int | None, typer.Option(help="decode: replies of each length [5]")] = None,
    levels: Annotated[str | None, typer.Option(help="parallel: requests at once [1,4,16]")] = None,
    load_tokens: Annotated[
        int | None, typer.Option(help="parallel: tokens per reply [256]")
    ] = None,
    batches: Annotated[int | None, typer.Option(help="parallel: batches per level [2]")] = None,
    questions: Annotated[
        str | None, typer.Option(help="question set name or JSONL file [article-40]")
    ] = None,
    quality_max_tokens: Annotated[
        int | None, typer.Option(help="quality: reply cap [48; 64 with --method article]")
    ] = None,
    questions_per_family: Annotated[
        int | None, typer.Option(help="quality: only the first N of each family [all]")
    ] = None,
    margin: Annotated[
        float | None, typer.Option(help="quality: the drop in points that still passes [2]")
    ] = None,
    fidelity: Annotated[
        int | None,
        typer.Option(help="token-level fidelity on the first N questions (logprobs) [off]"),
    ] = None,
    fidelity_reference: Annotated[
        Path | None,
        typer.Option(help="A's result (or fidelity record): force along its answer tokens"),
    ] = None,
    server_log: Annotated[
        Path | None,
        typer.Option(help="http:// targets: the server's log file, for its start-up facts"),
    ] = None,
    docker: Annotated[
        str | None,
        typer.Option(help="http:// targets: the server's container, read with `docker logs`"),
    ] = None,
    timeout: Annotated[
        str | None, typer.Option(help="the longest one request may take, e.g. 120s [120s]")
    ] = None,
    stall: Annotated[
        str | None,
        typer.Option(help="once tokens flow, the longest silence before a retry, e.g. 30s [30s]"),
    ] = None,
    retries: Annotated[
        int | None, typer.Option(help="tries sent again after a 429, 5xx or a reset [3]")
    ] = None,
    reruns: Annotated[
        int | None,
        typer.Option(help="parallel: extra batches per level to replace ones that don't count [2]"),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="OPENAI_API_KEY",
            show_envvar=True,
            help="bearer token for a hosted endpoint (never printed or written)",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            envvar="SAGEMETER_RAY",
            help="parallel: send the batches from a Ray cluster's nodes (auto, local, "
            "ray://HOST:PORT or HOST:PORT)",
        ),
    ] = None,
) -> None:
    """Measure one endpoint the article's way and write OUT_DIR/measure-NAME.json.

    Exits 3 (after writing the file, marked `complete: false`) when a figure could not be had.
    """
    from sagemeter.report.terminal import print_result
    from sagemeter.targets import parse_target
    from sagemeter.verbs import check_result_name

    parsed = parse_target(target)
    from sagemeter.server_logs import check_log_options, read_server_log

    check_log_options(parsed, server_log, docker)
    settings = _settings(
        quick,
        short_tokens,
        long_tokens,
        repeats,
        levels,
        load_tokens,
        batches,
        questions,
        quality_max_tokens,
        questions_per_family,
        margin,
        fidelity,
        timeout,
        stall,
        retries,
        reruns,
        method,
    )
    result_name = name or parsed.default_name
    check_result_name(result_name)
    if ray is not None:
        from sagemeter.targets import SageMakerTarget
        from sagemeter.transport.ray_pool import join_for_batches

        if isinstance(parsed, SageMakerTarget):
            raise UserError(
                "--ray spreads the batches of an HTTP endpoint over a cluster; a SageMaker "
                "endpoint's batches go through boto3 on this machine: leave out --ray"
            )
        join_for_batches(ray)
    reference = None
    if fidelity_reference is not None:
        from sagemeter.workflows import fidelity_reference as read_reference

        reference = read_reference(fidelity_reference)
    log_facts = read_server_log(server_log, docker)  # read first: a wrong log fails at once
    from sagemeter import activity

    activity.doing(f"measuring {parsed} into {out_dir}")
    result, path = _measure_with_progress(
        parsed, result_name, settings, out_dir, reference, api_key or None, log_facts
    )
    print_result(console, result)
    console.print(f"wrote {path}")
    if result.complete is False:
        missing = "; ".join(result.incomplete_because)
        err_console.print(f"[yellow]incomplete:[/] {missing}", highlight=False)
        raise typer.Exit(3)


def _measure_with_progress(
    parsed: Target,
    name: str,
    settings: MeasureSettings,
    out_dir: Path,
    fidelity_reference: FidelityRecord | None = None,
    api_key: str | None = None,
    server_log_facts: StartupFacts | None = None,
) -> tuple[MeasureResult, Path]:
    from sagemeter.atomic import check_output_file, check_output_folder
    from sagemeter.endpoints import check_target
    from sagemeter.results import result_path
    from sagemeter.workflows import measure_target, selected_questions, total_requests

    # Bad input fails here, before a progress bar is drawn.
    check_target(parsed)
    check_output_folder(out_dir, "OUT_DIR")
    check_output_file(result_path(out_dir, name), "the result file")
    total = total_requests(settings, len(selected_questions(settings).questions))
    with new_progress(transient=True) as bar:
        task = bar.add_task(name, total=total)
        outcome = asyncio.run(
            measure_target(
                parsed,
                name=name,
                settings=settings,
                out_dir=out_dir,
                progress=lambda count: bar.advance(task, count),
                on_phase=lambda phase: bar.update(task, description=f"{name}: {phase}"),
                fidelity_reference=fidelity_reference,
                api_key=api_key,
                server_log_facts=server_log_facts,
            )
        )
        bar.update(task, description=f"{name}: done")
    return outcome


@app.command()
def combine(
    out: Annotated[Path, typer.Argument(help="where to write the comparison JSON")],
    files: Annotated[list[Path], typer.Argument(help="two or more measure-*.json files, A first")],
    price_per_hour: Annotated[float | None, typer.Option(help="USD per instance-hour")] = None,
    margin: Annotated[
        float | None,
        typer.Option(help="quality verdict margin in points [the one A declared, else 2]"),
    ] = None,
) -> None:
    """Print the article's comparison table for two or more result files and write it as JSON.

    Given the shard files of `sagemeter load --shard i/n`, it merges them into one load result.
    """
    from sagemeter.atomic import check_output_file
    from sagemeter.cli_load import is_load_result, merge_shard_files

    check_output_file(out, "OUT")
    if files and is_load_result(files[0]):
        merge_shard_files(out, list(files))
        return
    from sagemeter.compare import combine as build
    from sagemeter.compare import save_comparison
    from sagemeter.report.terminal import print_comparison

    comparison = build(list(files), price_per_hour=price_per_hour, margin_points=margin)
    print_comparison(console, comparison)
    save_comparison(comparison, out)
    console.print(f"wrote {out}")


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option(help="run folder [runs/DATE-demo]")] = None,
    quick: Annotated[bool, typer.Option(help="shrink everything, for smoke tests")] = False,
    questions: Annotated[
        str | None,
        typer.Option(help="question set name or JSONL file [article-40]; see `questions list`"),
    ] = None,
    questions_per_family: Annotated[
        int | None, typer.Option(help="only the first N questions of each family [all]")
    ] = None,
    margin: Annotated[
        float | None, typer.Option(help="quality verdict: the drop in points that passes [2]")
    ] = None,
    fidelity: Annotated[
        int | None,
        typer.Option(help="token-level fidelity on the first N questions, B and A' forced along A"),
    ] = None,
) -> None:
    """A-B-A on the embedded engine: 32-bit, 4-bit, 32-bit again; then the comparison."""
    from sagemeter.cli_run import demo_face  # the built-in plan, run as `sagemeter run` runs one

    demo_face(out, quick, questions, questions_per_family, margin, fidelity)


# Faces of features that live in their own modules; each module has `register(app)`.
COMMAND_MODULES = (
    "sagemeter.cli_sagemaker",
    "sagemeter.cli_mcp",
    "sagemeter.cli_report",
    "sagemeter.cli_questions",
    "sagemeter.fidelity.cli",
    "sagemeter.cli_calibrate",
    "sagemeter.cli_load",
    "sagemeter.cli_engines",
    "sagemeter.cli_inspect",
    "sagemeter.cli_run",
)


# Commands whose start-up time is part of what they measure: run as `sagemeter load …`, only
# their own module is registered, so the CLI does not import boto3 (half a second) first.
LEAN_COMMANDS = {
    "load": "sagemeter.cli_load",
    "selfcheck": "sagemeter.cli_load",
    "load-merge": "sagemeter.cli_load",
    "calibrate-server": "sagemeter.cli_calibrate",
}


def _register_optional_commands(argv: list[str] | None = None) -> None:
    """Add the commands of every feature module that is present in this install (only the one
    module a lean command needs, when `argv` names one)."""
    import importlib

    words = sys.argv[1:] if argv is None else argv
    lean = LEAN_COMMANDS.get(words[0]) if words else None
    for module_name in (lean,) if lean else COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(app)


def _redact_output() -> None:
    """Everything this process prints passes through the one redaction (sagemeter.redaction)."""
    from sagemeter.redaction import RedactingStream

    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)


INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C (128 + SIGINT)


def _usage_line(exc: Exception) -> str:
    """click's message for a usage error, on one line, with the help command to run."""
    format_message = getattr(exc, "format_message", None)
    message = format_message() if callable(format_message) else str(exc)
    context = getattr(exc, "ctx", None)
    path = getattr(context, "command_path", None) or "sagemeter"
    return f"error: {' '.join(str(message).split())} (see `{path} --help`)"


def main(argv: list[str] | None = None) -> None:
    """Entry point: UserError → one line on stderr and exit 2; Ctrl-C → what was interrupted
    and what was kept, exit 130. Usage errors (unknown command, missing argument) are click's
    own short messages, exit 2; a command may exit 3 (an incomplete measurement)."""
    from sagemeter.activity import interrupted_message

    _redact_output()
    _register_optional_commands(argv)
    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as exc:
        # No markup: a message may quote brackets (`pip install 'sagemeter[ray]'`) rich would eat.
        err_console.print(f"error: {exc}", style="red", highlight=False, markup=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err_console.print(interrupted_message(), highlight=False, markup=False)
        sys.exit(INTERRUPTED)
    except typer.TyperException as exc:  # a usage error: the same one line, and where to look
        err_console.print(_usage_line(exc), style="red", highlight=False, markup=False)
        sys.exit(getattr(exc, "exit_code", 2))
    if code == INTERRUPTED:  # typer turns Ctrl-C into this exit code before we see it
        err_console.print(interrupted_message(), highlight=False, markup=False)
    sys.exit(code if isinstance(code, int) else 0)
