"""`sagemeter measure`: one endpoint measured the article's way, into OUT_DIR/measure-NAME.json."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from sagemeter.cli.common import console, err_console, new_progress
from sagemeter.errors import UserError
from sagemeter.printable import printable

if TYPE_CHECKING:
    from sagemeter.results import MeasureResult, StartupFacts
    from sagemeter.results.fidelity_record import FidelityRecord
    from sagemeter.settings import MeasureSettings
    from sagemeter.targets import Target


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
    prefill_tokens: str | None = None,
    startup_timeout: str | None = None,
    long_prompt_levels: str | None = None,
    tokenizer: Path | None = None,
    metrics_wait: str | None = None,
    speed_precision: float | None = None,
    max_repeats: int | None = None,
    max_batches: int | None = None,
    max_minutes: float | None = None,
) -> MeasureSettings:
    from sagemeter.calibrate.timing import parse_duration
    from sagemeter.limits import parse_levels
    from sagemeter.measure.prompt_tokenizer import check_tokenizer_path
    from sagemeter.settings import measure_settings, parse_levels_or_none, parse_prefill_tokens

    overrides = {
        "short_tokens": short_tokens,
        "long_tokens": long_tokens,
        "decode_repeats": repeats,
        "prefill_tokens": (
            parse_prefill_tokens(prefill_tokens) if prefill_tokens is not None else None
        ),
        "long_prompt_levels": (
            parse_levels_or_none(long_prompt_levels, "--long-prompt-levels")
            if long_prompt_levels is not None
            else None
        ),
        "tokenizer": str(check_tokenizer_path(tokenizer)) if tokenizer is not None else None,
        "load_levels": parse_levels(levels) if levels else None,
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
        "startup_timeout_s": (
            parse_duration(startup_timeout, "--startup-timeout")
            if startup_timeout is not None
            else None
        ),
        "metrics_wait_s": (
            parse_duration(metrics_wait, "--metrics-wait") if metrics_wait is not None else None
        ),
        "speed_precision": speed_precision,
        "speed_max_repeats": max_repeats,
        "speed_max_batches": max_batches,
        "max_minutes": max_minutes,
    }
    return measure_settings(quick, overrides, method=method)


def measure(
    out_dir: Annotated[Path, typer.Argument(help="folder for measure-NAME.json")],
    target: Annotated[
        str,
        typer.Argument(
            help="http://HOST:PORT, local:CHECKPOINT, vllm:CHECKPOINT, "
            'cmd:"COMMAND --port {port}", NAME@REGION or NAME '
            "(SageMaker: where this machine placed it, else the configured region)"
        ),
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
    repeats: Annotated[
        int | None, typer.Option(help="decode and prefill: replies of each length [5]")
    ] = None,
    prefill_tokens: Annotated[
        str | None,
        typer.Option(
            help="prefill: short and long prompt length in the server's tokens, or none "
            "[256,4096; none with --quick or --method article]"
        ),
    ] = None,
    long_prompt_levels: Annotated[
        str | None,
        typer.Option(
            help="long prompts under load: requests at once, each its own prompt of the prefill "
            "phase's long length, e.g. 1,4,16 [none]"
        ),
    ] = None,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            help="prefill: a .gguf file or a Hugging Face folder (tokenizer.json) whose "
            "tokenizer counts the prompts when the server gives no usage.prompt_tokens "
            "[local:/vllm: the checkpoint's own]"
        ),
    ] = None,
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
    speed_precision: Annotated[
        float | None,
        typer.Option(
            help="repeat decode pairs past --repeats, and each level's batches past "
            "--batches, until the figure's 95% interval's half-width is within this share of "
            "it, e.g. 0.03 [off: fixed counts]"
        ),
    ] = None,
    max_repeats: Annotated[
        int | None,
        typer.Option(help="decode: the most pairs --speed-precision may ask [20]"),
    ] = None,
    max_batches: Annotated[
        int | None,
        typer.Option(help="parallel: the most batches per level --speed-precision may ask [6]"),
    ] = None,
    max_minutes: Annotated[
        float | None,
        typer.Option(
            help="the longest the measurement may take: the phase in progress is cut there and "
            "the rest not run, each named in the result (exit 3) [no limit]"
        ),
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
    startup_timeout: Annotated[
        str | None,
        typer.Option(
            help="local:, vllm:, cmd: targets: the longest wait for the server sagemeter "
            "starts to answer, e.g. 10m [the engine's own; cmd: 10m]"
        ),
    ] = None,
    reruns: Annotated[
        int | None,
        typer.Option(help="parallel: extra batches per level to replace ones that don't count [2]"),
    ] = None,
    metrics_wait: Annotated[
        str | None,
        typer.Option(
            help="SageMaker targets: the longest wait, once measured, for the endpoint's "
            "CloudWatch metrics of each phase, e.g. 3m; 0s reads what is there [3m; 0s with "
            "--quick]"
        ),
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
    force: Annotated[
        bool, typer.Option(help="replace OUT_DIR/measure-NAME.json if it already exists")
    ] = False,
) -> None:
    """Measure one endpoint the article's way and write OUT_DIR/measure-NAME.json.

    Exits 3 (after writing the file, marked `complete: false`) when a figure could not be had.
    """
    from sagemeter.report.terminal import print_result
    from sagemeter.results import check_result_name
    from sagemeter.targets import input_paths, parse_target

    parsed = parse_target(target)
    from sagemeter.transport.request import check_api_key

    check_api_key(api_key, "--api-key (or OPENAI_API_KEY)")
    from sagemeter.engines.server_logs import check_log_options, read_server_log

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
        prefill_tokens,
        startup_timeout,
        long_prompt_levels,
        tokenizer,
        metrics_wait,
        speed_precision,
        max_repeats,
        max_batches,
        max_minutes,
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
    log_facts = read_server_log(server_log, docker)  # read first: a wrong log fails at once
    from sagemeter.engines.endpoints import check_target
    from sagemeter.measure.workflow import selected_questions

    # The inputs are checked before OUT_DIR is made, so bad input leaves no empty folder; the
    # fidelity reference is read after the output check, which names an output given as input.
    check_target(parsed)
    selected_questions(settings)
    from sagemeter.atomic import removed_if_left_empty

    # A folder this command makes goes again when the command fails before writing in it (a
    # refused preflight, an unreadable reference); a folder the user had is never removed.
    with removed_if_left_empty(out_dir):
        given = [fidelity_reference, server_log, questions, tokenizer, *input_paths(target)]
        _check_result_file(out_dir, result_name, force, given)
        reference = None
        if fidelity_reference is not None:
            from sagemeter.measure.workflow import fidelity_reference as read_reference

            reference = read_reference(fidelity_reference)
        from sagemeter.cli import interrupt as activity

        activity.doing(f"measuring {parsed} into {out_dir}")
        result, path = _measure_with_progress(
            parsed, result_name, settings, out_dir, reference, api_key or None, log_facts
        )
    print_result(console, result)
    console.print(f"wrote {path}")
    if result.complete is False:
        missing = "; ".join(result.incomplete_because)
        err_console.print(f"[yellow]incomplete:[/] {escape(printable(missing))}", highlight=False)
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
    from sagemeter.measure.workflow import measure_target, selected_questions, total_requests

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
                on_phase=lambda phase: bar.update(task, description=escape(f"{name}: {phase}")),
                fidelity_reference=fidelity_reference,
                api_key=api_key,
                server_log_facts=server_log_facts,
            )
        )
        bar.update(task, description=f"{name}: done")
    return outcome


def _check_result_file(
    out_dir: Path, name: str, force: bool, inputs: list[Path | str | None]
) -> None:
    """The result file is a new name (or replaced only with --force) and none of the inputs."""
    from sagemeter.atomic import check_output_file, check_output_folder
    from sagemeter.filekinds import MEASURE
    from sagemeter.measure.workflow import engine_log_path
    from sagemeter.results import result_path

    check_output_folder(out_dir, "OUT_DIR")
    given = [Path(item) for item in inputs if item is not None]
    path = result_path(out_dir, name)
    check_output_file(path, "the result file", force=force, inputs=given, kind=MEASURE)
    # A local engine's log goes beside the result, rewritten each time (never a result, a link)
    check_output_file(engine_log_path(out_dir, name), "the engine log", force=True, inputs=given)


def register(app: typer.Typer) -> None:
    """Add `measure` to the main app."""
    app.command()(measure)
