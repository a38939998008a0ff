"""measure_endpoint and compare_results: the CLI's `measure` and `combine`, into one folder.

Results go to the server's results folder (never a path the assistant makes up), and a
measurement never replaces an existing result: its name must be new.
"""

import io
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from sagemeter.atomic import check_output_file
from sagemeter.compare import combine, save_comparison
from sagemeter.engines.endpoints import check_target
from sagemeter.figures import (
    LevelFamily,
    figures,
    level_figures,
    level_label,
    plugin_level_figures,
    stored_levels,
    stored_value,
)
from sagemeter.figures.builtin import WEIGHTS
from sagemeter.filekinds import COMPARISON, MEASURE
from sagemeter.mcp import names
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply
from sagemeter.mcp.models import CompareAnswer, MeasureAnswer
from sagemeter.mcp.progress import Relay
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.measure.workflow import measure_target, selected_questions, total_requests
from sagemeter.options.combine import COMBINE, CombineOptions
from sagemeter.options.faces import read_options, with_options
from sagemeter.options.measure import MEASURE as MEASURE_OPTIONS
from sagemeter.options.measure import MeasureOptions, SpeedStop
from sagemeter.printable import SafeConsole
from sagemeter.report.terminal import format_value, print_comparison
from sagemeter.results import MeasureResult, check_result_name, result_path
from sagemeter.targets import parse_target

MEASURES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
COMPARES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class Tally:
    """Requests finished so far, and the phase they belong to."""

    def __init__(self) -> None:
        self.done = 0
        self.phase = "starting"


def stopping_lines(result: MeasureResult) -> list[str]:
    """How each phase with a stopping rule ended: "decode: stopped after 7 of at most 20 …"."""
    detail = result.detail
    if detail is None:
        return []
    lines = []
    if detail.decode is not None and detail.decode.precision is not None:
        lines.append(f"decode: {detail.decode.precision.stopping_reason}")
    for level in detail.load.levels if detail.load is not None else []:
        if level.precision is not None:
            lines.append(f"{level.concurrency} at once: {level.precision.stopping_reason}")
    return lines


_REPLACE_OR_RENAME = "pass force=true to replace it, or choose another name"


def measure_text(result: MeasureResult, path: Path) -> str:
    speeds = ", ".join(
        f"c{level} {format_value('load', value)}"
        for level, value in result.load_tokens_per_second.items()
    )
    parts = [
        f"decode {format_value('decode', result.decode_tokens_per_second)} tok/s",
        f"per-call cost {format_value('cost', result.per_call_fixed_cost_seconds)} s",
        f"parallel {speeds or '-'} tok/s",
        f"quality {result.quality or '-'}",
    ]
    if result.detail is not None and result.detail.prefill is not None:
        rate = format_value("prefill", result.prefill_tokens_per_second)
        parts.insert(2, f"prefill {rate} tok/s")
    if result.long_prompt_tokens_per_second:
        long = ", ".join(
            f"c{level} {format_value('load', value)}"
            for level, value in result.long_prompt_tokens_per_second.items()
        )
        parts.insert(-1, f"long prompts {long} tok/s")
    if result.weights_gib is not None:
        parts.append(f"weights {format_value(WEIGHTS.key, result.weights_gib)} GiB")
    for figure in figures(["more"]):  # a plug-in's figures, as declared
        if (value := stored_value(result, figure)) is not None:
            parts.append(f"{figure.label} {format_value(figure.key, float(value))}")
    for family in plugin_level_figures():  # a plug-in's level families, as declared
        for level, found in stored_levels(result, family).items():
            parts.append(f"{level_label(family, level)} {format_value(family.name, found)}")
    warnings = result.detail.warnings if result.detail else []
    host = result.detail.host if result.detail else None
    busy = host.busy_note() if host else None
    warnings = [*warnings, busy] if busy else warnings
    notes = f"\nwarnings: {'; '.join(warnings)}" if warnings else ""
    stopped = stopping_lines(result)
    notes = "".join(f"\n{line}" for line in stopped) + notes
    if result.complete is False:
        notes = f"\nINCOMPLETE: {'; '.join(result.incomplete_because)}" + notes
    return f"{result.name}: " + ", ".join(parts) + f"\nwrote {path}" + notes


def _shown(family: LevelFamily) -> bool:
    """A level family the reply carries: a stored one its model declares, or a plug-in's (a
    key of its own); sagemeter's others stay in the result file."""
    name = family.name
    declared = name in MeasureAnswer.model_fields or name not in MeasureResult.model_fields
    return family.stored and declared


def register_measure_tools(server: ServerTools, config: ServerConfig) -> None:
    """Add measure_endpoint and compare_results to `server`."""

    @server.tool(title="Measure an endpoint", annotations=MEASURES)
    @guarded
    @with_options(MEASURE_OPTIONS, "mcp")  # its settings' arguments: measure's options model
    async def measure_endpoint(
        ctx: Context,
        target: Annotated[
            str,
            Field(
                description="http://HOST:PORT (OpenAI-compatible), local:CHECKPOINT (embedded "
                "engine, started and stopped here), vllm:CHECKPOINT, cmd:COMMAND (a server "
                "started from a command line with {port}; needs the user's --allow-commands), "
                "NAME@REGION (SageMaker) or NAME (SageMaker, where this machine placed it, else "
                "the configured region)"
            ),
        ],
        name: Annotated[
            str | None, Field(description="result name, new in the results folder")
        ] = None,
        **options: Any,
    ) -> Annotated[CallToolResult, MeasureAnswer]:
        """Measure one endpoint the article's way (decode rate, parallel load, quality) and its
        prompt processing (prefill rate, TTFT at a long prompt, the prefix cache).

        Writes measure-NAME.json in the results folder and returns its figures; unset knobs keep
        the article's values (or the quick ones). Sends progress; cancelling leaves no file.
        """
        parsed = parse_target(names.target(config, target))
        if options.get("questions") is not None:
            options["questions"] = names.question_set(config, options["questions"])
        given, stop = read_options(MEASURE_OPTIONS, options, "mcp")
        assert isinstance(given, MeasureOptions) and isinstance(stop, SpeedStop)
        settings = given.settings(stop, face="mcp")
        result_name = name or parsed.default_name
        check_result_name(result_name, label="name")
        path = result_path(config.results_dir, result_name)
        check_output_file(
            path, "the result file", force=False, to_replace="choose another name", kind=MEASURE
        )
        check_target(parsed)
        total = total_requests(settings, len(selected_questions(settings).questions))
        async with Relay(ctx) as relay:
            tally = Tally()

            def progress(count: int) -> None:
                tally.done += count
                # A stall asked again sends more than planned: the total grows with it, so
                # progress never passes its total.
                relay.post(tally.done, max(total, tally.done), f"{result_name}: {tally.phase}")

            def on_phase(phase: str) -> None:
                tally.phase = phase

            relay.post(0, total, f"{result_name}: starting")
            result, written = await measure_target(
                parsed,
                name=result_name,
                settings=settings,
                out_dir=config.results_dir,
                progress=progress,
                on_phase=on_phase,
            )
        answer = MeasureAnswer(
            name=result_name,
            target=str(parsed),
            path=str(written),
            **{f.key: stored_value(result, f) for f in figures() if f.stored},
            **{f.name: stored_levels(result, f) for f in level_figures() if _shown(f)},
            quality=result.quality,
            quick=settings.quick,
            complete=result.complete is not False,
            incomplete_because=result.incomplete_because,
            failed_requests=result.detail.failed_requests if result.detail else 0,
            retries=result.detail.retries if result.detail else 0,
            warnings=result.detail.warnings if result.detail else [],
            stopped=stopping_lines(result),
        )
        return reply(measure_text(result, written), answer)

    @server.tool(title="Compare result files", annotations=COMPARES)
    @guarded
    @with_options(COMBINE, "mcp")  # price_per_hour, margin_points: combine's options model
    async def compare_results(
        results: Annotated[
            list[str],
            Field(
                min_length=2,
                description="two or more result names (from measure_endpoint) or .json file "
                "names in the results folder (never paths), the baseline first; A-B-A order adds "
                "the drift",
            ),
        ],
        name: Annotated[
            str | None, Field(description="comparison name (default: the result names)")
        ] = None,
        force: Annotated[
            bool, Field(description="replace compare-NAME.json if it already exists")
        ] = False,
        **options: Any,
    ) -> Annotated[CallToolResult, CompareAnswer]:
        """The article's comparison table: each figure, its ratio (with its 95% interval) to the
        first, costs, A-B-A drift, and the quality verdict (PASS / FAIL / INCONCLUSIVE).

        Writes compare-NAME.json in the results folder.
        """
        (given,) = read_options(COMBINE, options, "mcp")
        assert isinstance(given, CombineOptions)
        if name:
            check_result_name(name, label="name")  # before any file is read
        paths = [names.result_file(config, item) for item in results]
        comparison = combine(paths, price_per_hour=given.price_per_hour, margin_points=given.margin)
        out_name = name or "-vs-".join(comparison.names)
        check_result_name(out_name, label="name")  # the default, made of the results' names
        out = config.results_dir / f"compare-{out_name}.json"
        check_output_file(
            out,
            "the comparison file",
            force=force,
            inputs=paths,
            to_replace=_REPLACE_OR_RENAME,
            kind=COMPARISON,
        )
        save_comparison(comparison, out)
        buffer = io.StringIO()
        print_comparison(SafeConsole(file=buffer, width=120, color_system=None), comparison)
        answer = CompareAnswer(**comparison.model_dump(), path=str(out))
        return reply(f"{buffer.getvalue().rstrip()}\nwrote {out}", answer)
