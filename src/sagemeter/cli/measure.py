"""`sagemeter measure`: one endpoint measured the article's way, into OUT_DIR/measure-NAME.json."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from sagemeter import signal_wakeup
from sagemeter.cli.common import console, err_console, new_progress
from sagemeter.errors import UserError
from sagemeter.printable import printable

if TYPE_CHECKING:
    from sagemeter.results import MeasureResult, StartupFacts
    from sagemeter.results.fidelity_record import FidelityRecord
    from sagemeter.settings import MeasureSettings
    from sagemeter.targets import Target


def _settings(
    quick: bool = False, tokenizer: Path | None = None, **options: Any
) -> MeasureSettings:
    """The settings measure's options make (`sagemeter.options.measure`), checked as the
    command line spells them."""
    from sagemeter.options.faces import read_options
    from sagemeter.options.measure import MEASURE, MeasureOptions, SpeedStop

    given, stop = read_options(MEASURE, {**options, "quick": quick}, "cli")
    assert isinstance(given, MeasureOptions) and isinstance(stop, SpeedStop)
    settings = given.settings(stop, face="cli")
    if tokenizer is None:
        return settings
    from sagemeter.prompt_tokenizer import check_tokenizer_path

    return settings.model_copy(update={"tokenizer": str(check_tokenizer_path(tokenizer))})


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
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            help="prefill: a .gguf file or a Hugging Face folder (tokenizer.json) whose "
            "tokenizer counts the prompts when the server gives no usage.prompt_tokens "
            "[local:/vllm: the checkpoint's own]"
        ),
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
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="OPENAI_API_KEY",
            show_envvar=True,
            help="bearer token for a hosted endpoint (never printed or written)",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="replace OUT_DIR/measure-NAME.json if it already exists")
    ] = False,
    **options: Any,
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
    settings = _settings(tokenizer=tokenizer, **options)
    result_name = name or parsed.default_name
    check_result_name(result_name)
    ray = options.get("ray")
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
        questions = options.get("questions")
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
        outcome = signal_wakeup.run(
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
    """Add `measure` to the main app, its settings' options made from measure's options model."""
    from sagemeter.options.faces import with_options
    from sagemeter.options.measure import MEASURE

    app.command()(with_options(MEASURE, "cli")(measure))
