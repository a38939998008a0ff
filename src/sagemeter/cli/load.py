"""`sagemeter load` and `sagemeter selfcheck`, and the merge of shard files that `combine` does
(thin faces over `sagemeter.loadgen`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sagemeter.errors import UserError
from sagemeter.printable import printable

if TYPE_CHECKING:
    from sagemeter.loadgen.result import LoadResult
    from sagemeter.loadgen.selfcheck import SelfCheck
    from sagemeter.loadgen.sessions import SessionPlan
    from sagemeter.loadgen.settings import LoadSettings
    from sagemeter.options.load import LoadOptions


def _levels(text: str) -> list[int]:
    """Selfcheck's levels: the one parser of levels, up to the load generator's own ceiling."""
    from sagemeter.limits import parse_levels
    from sagemeter.loadgen.settings import MAX_CONCURRENCY

    return parse_levels(text, most=MAX_CONCURRENCY)


def _check_ray(address: str) -> None:
    """A malformed address or a missing Ray install: one line, before any work."""
    from sagemeter.transport.ray_pool import check_address, require_ray

    check_address(address)
    require_ray()


def register(app: typer.Typer) -> None:
    """Add `load` (its options made from its options model, `sagemeter.options.load`) and
    `selfcheck` to the main CLI (`combine` merges shard files)."""

    def load(
        target: Annotated[
            str,
            typer.Argument(
                help="http://HOST:PORT (with /v1 or not), or a server sagemeter starts for the "
                'run: local:CHECKPOINT, vllm:CHECKPOINT, cmd:"COMMAND --port {port}"'
            ),
        ],
        **options: Any,
    ) -> None:
        """Load an OpenAI-compatible server and measure it, checking the client kept up.

        A server target (local:, vllm:, cmd:) is started first (and stopped after), as
        measure's are.
        """
        from sagemeter.options.faces import read_options
        from sagemeter.options.load import LOAD, LoadOptions

        (given,) = read_options(LOAD, options, "cli")  # a bad value: one line, before work
        assert isinstance(given, LoadOptions)
        with LOAD.spelling("cli"):  # options that do not go together, named by their flags
            run_load(target, given, lambda url: load(url, **options))

    from sagemeter.options.faces import with_options
    from sagemeter.options.load import LOAD

    app.command()(with_options(LOAD, "cli")(load))

    @app.command()
    def selfcheck(
        levels: Annotated[str, typer.Option(help="streams at once, comma-separated")] = (
            "1,16,32,64,128"
        ),
        seconds: Annotated[float, typer.Option(help="sending time per level")] = 10.0,
        workers: Annotated[
            int | None, typer.Option(help="client processes [cores]", show_default=False)
        ] = None,
        out: Annotated[Path | None, typer.Option(help="write every level's figures here")] = None,
        force: Annotated[bool, typer.Option(help="replace --out if it already exists")] = False,
        ray: Annotated[
            str | None,
            typer.Option(
                help="check the workers on a Ray cluster whose nodes are on this machine: auto, "
                "local or HOST:PORT (--workers then counts per node)",
                show_default=False,
            ),
        ] = None,
    ) -> None:
        """Measure a server of known timing: where does this machine's client stop being right?"""
        started = time.perf_counter()
        from rich.markup import escape

        from sagemeter.atomic import check_output_file, write_text_atomic
        from sagemeter.cli.common import err_console
        from sagemeter.cli.live import LiveRuns, progress_mode
        from sagemeter.loadgen.selfcheck import run_selfcheck
        from sagemeter.loadgen.tables import level_tables
        from sagemeter.printable import SafeConsole

        asked = _levels(levels)
        watch = LiveRuns(err_console, progress_mode(err_console))
        if out is not None:
            from sagemeter.filekinds import SELFCHECK

            check_output_file(out, "--out", force=force, kind=SELFCHECK)
        from sagemeter.limits import Seconds, Workers, checked

        checked(seconds, Seconds, "--seconds")
        if workers is not None:
            checked(workers, Workers, "--workers")
        if ray is not None:
            _check_ray(ray)
        console = SafeConsole()
        console.print(
            "known-truth server: TTFT 50 ms, 4 ms per token, 256-token replies", highlight=False
        )
        check = run_selfcheck(
            asked,
            seconds,
            workers,
            started,
            on_level=lambda c: console.print(*level_tables(c)),
            ray=ray,
            watch=watch,
        )
        if out is not None:
            write_text_atomic(out, check.model_dump_json(indent=1) + "\n")
            console.print(f"wrote {out}", highlight=False)
        why = failed_selfcheck(check)
        if why is not None:
            SafeConsole(stderr=True).print(f"[yellow]incomplete:[/] {escape(why)}", highlight=False)
            raise typer.Exit(3)


def load_settings(url: str, o: LoadOptions) -> LoadSettings:
    """Every option checked together (before an engine is started for an engine target); the
    URL kept as its base with /v1, as every command records a server."""
    from sagemeter import filekinds
    from sagemeter.atomic import check_distinct_outputs, check_output_file
    from sagemeter.bounds import MAX_WAIT_S
    from sagemeter.loadgen.schedule import parse_shard
    from sagemeter.loadgen.settings import LoadSettings
    from sagemeter.targets import http_target
    from sagemeter.transport.request import check_api_key

    url = http_target(url).base_url
    check_api_key(o.api_key, "--api-key (or OPENAI_API_KEY)")
    inputs = [path for path in (o.trace, o.tokenizer) if path is not None]
    if o.out is not None:  # a shard's file replaces only a shard's (with --force)
        kind = filekinds.SHARD if o.shard is not None else filekinds.LOAD
        check_output_file(o.out, "--out", force=o.force, inputs=inputs, kind=kind)
    if o.csv is not None:
        check_distinct_outputs([("--out", o.out), ("--csv", o.csv)])
        check_output_file(o.csv, "--csv", force=o.force, inputs=inputs)
    if o.ray is not None:
        _check_ray(o.ray)
        if o.shard is not None or o.start_at is not None:
            raise UserError(
                "--ray spreads one run over the cluster; leave out --shard and --start-at"
            )
    if o.search is not None and o.ray is not None:
        raise UserError("--search runs its probes on this machine; leave out --ray")
    workload = o.trace is not None or o.input_tokens is not None or o.output_tokens is not None
    if o.prompt is not None and (o.trace is not None or o.input_tokens is not None):
        raise UserError(
            "--prompt is the one prompt sent; --trace and --input-tokens build their own, "
            "so give one of them"
        )
    if workload and o.ray is not None:
        raise UserError(
            "--trace, --input-tokens and --output-tokens run on this machine; leave out --ray"
        )
    seconds = o.duration
    if seconds is None and o.trace is not None:
        from sagemeter.loadgen.trace import read_trace_cached

        seconds = max(read_trace_cached(o.trace).span_s / o.trace_speed, 0.001)
        if seconds > MAX_WAIT_S:  # the trace's own length: a sending time like --duration's
            raise UserError(
                f"--trace lasts {seconds / 3600:,.0f} h at --trace-speed {o.trace_speed:g}: "
                "more than a day; give --duration to send a part of it, or a larger --trace-speed"
            )
    shard_index, shard_count = parse_shard(o.shard) if o.shard is not None else (0, 1)
    if o.sessions is None and (o.turns != 2 or o.think_time != "fixed:0s"):
        raise UserError("--turns and --think-time shape --sessions; give --sessions N")
    if o.sessions is not None and o.ray is not None:
        raise UserError("--sessions runs its conversations on this machine; leave out --ray")
    # Each option under its setting (`Opt.setting`); unset ones keep the load generator's.
    fields = {key: value for key, value in o.given().items() if value is not None}
    fields |= {key: str(fields[key]) for key in ("trace", "tokenizer") if key in fields}
    checked = LoadSettings.model_validate(
        {
            **fields,
            "target": url,
            "duration_s": 10.0 if seconds is None else seconds,
            "shard_index": shard_index,
            "shard_count": shard_count,
            "raw": o.raw or o.csv is not None,  # the CSV's rows are the raw records
        }
    )
    if o.sessions is not None:
        from sagemeter.loadgen.sessions import check_session_settings

        session_plan(o)  # bad --sessions, --turns or --think-time: before any work
        checked = checked.model_copy(update={"concurrency": o.sessions})
        check_session_settings(checked)
    return checked.checked()


def session_plan(o: LoadOptions) -> SessionPlan:
    from sagemeter.loadgen.sessions import SessionPlan, parse_think_time

    assert o.sessions is not None
    return SessionPlan(o.sessions, o.turns, parse_think_time(o.think_time))


def run_load(target: str, o: LoadOptions, again: Callable[[str], None]) -> None:
    """`sagemeter load` with its options read: checked together, then the run (`again`: the
    same command on a server target's URL, once sagemeter has started it)."""
    from rich.markup import escape

    from sagemeter.cli.common import err_console
    from sagemeter.cli.live import LiveRuns, progress_mode
    from sagemeter.loadgen.files import write_result
    from sagemeter.loadgen.loadrun import run_once
    from sagemeter.loadgen.sweep import run_sweep
    from sagemeter.loadgen.tables import result_tables
    from sagemeter.printable import SafeConsole
    from sagemeter.targets import ENGINE_PREFIX, EngineTarget, parse_target

    watch = LiveRuns(err_console, progress_mode(err_console))  # a bad value: before work
    started = time.perf_counter()
    if ENGINE_PREFIX.match(target.strip()) and isinstance(parse_target(target), EngineTarget):
        # A server target: the options are checked first, then the server is started for
        # the load (a slot per stream for the embedded engine) and stopped after it.
        load_settings("http://127.0.0.1:1", o)
        from sagemeter.cli.engines import run_on_engine

        run_on_engine(
            target,
            o.max_tokens,
            o.sessions or o.concurrency,  # a slot per stream, or per session
            again,
            startup_timeout_s=o.startup_timeout,
            api_key=o.api_key,
        )
        return
    settings = load_settings(target, o)
    from sagemeter.cli import interrupt as activity

    activity.doing(f"loading {target}")
    api_key, ray = o.api_key, o.ray

    def run_level(level: LoadSettings, level_started: float) -> LoadResult:
        if ray is None:
            return run_once(level, level_started, api_key, watch)
        from sagemeter.loadgen.ray_run import run_on_ray

        return run_on_ray(level, level_started, ray, api_key, watch)

    from sagemeter.loadgen.identity import ServerChanged, WatchedRuns
    from sagemeter.measure.identity import IdentityWatch

    # The server's identity, read before the first run and checked after each one.
    watched = WatchedRuns(IdentityWatch.opened(settings.target, api_key))
    try:
        if o.sessions is not None:
            from sagemeter.loadgen.sessions import run_sessions

            plan = session_plan(o)
            result: LoadResult = watched.run(
                lambda level: run_sessions(level, plan, started, api_key), settings
            )
        elif settings.search is not None:
            from sagemeter.loadgen.operating_point import search_operating_point
            from sagemeter.loadgen.tables import probe_line

            result = search_operating_point(
                settings,
                lambda level, stop: watched.run(
                    lambda probe: run_once(probe, time.perf_counter(), api_key, watch, stop),
                    level,
                ),
                lambda: time.perf_counter() - started,
                on_probe=lambda probe: err_console.print(
                    probe_line(probe, settings.slo_percentile), highlight=False, markup=False
                ),
            )
        elif settings.sweep:
            result = run_sweep(
                settings,
                lambda level: watched.run(lambda one: run_level(one, time.perf_counter()), level),
                lambda: time.perf_counter() - started,
            )
        else:
            result = watched.run(lambda one: run_level(one, started), settings)
    except ServerChanged as exc:  # the one run: kept, made invalid by the change
        result = exc.result
    result = watched.finish(result)
    console = SafeConsole()
    for table in result_tables(result):
        console.print(table)
    from sagemeter.loadgen.sessions import SessionLoadResult, turn_table

    if isinstance(result, SessionLoadResult):
        console.print(turn_table(result.sessions))
    for problem in result.problems:
        console.print(f"problem: {printable(problem)}", highlight=False, markup=False)
    if o.csv is not None:
        from sagemeter.loadgen.request_csv import without_raw, write_request_csv

        rows = write_request_csv(o.csv, result)
        console.print(f"wrote {o.csv} ({rows} requests)", highlight=False)
        if not o.raw:
            result = without_raw(result)
    if o.out is not None:
        before = time.perf_counter()
        write_result(o.out, result)
        console.print(f"wrote {o.out} ({time.perf_counter() - before:.3f} s)", highlight=False)
    if result.cluster is not None and result.cluster.lost_nodes:
        raise typer.Exit(3)  # a node's requests are missing: the figures are not the run asked
    why = failed_run(result)
    if why is not None:
        SafeConsole(stderr=True).print(f"[yellow]incomplete:[/] {escape(why)}", highlight=False)
        raise typer.Exit(3)


def failed_run(result: LoadResult) -> str | None:
    """Why a load run (or a sweep) did not do its job, or None: exit code 3 then, as for an
    incomplete measurement, so a script never takes a run of failures for a result."""
    identity = result.server_identity
    if identity is not None and identity.changed is not None:  # first: it explains the rest
        return f"server identity: {identity.changed}"
    if result.requests_completed == 0:
        return f"every request failed ({result.requests_failed}); no figure was measured"
    search = result.slo_search
    if search is not None:
        # The search judged its probes itself: no load meeting the SLO is a finding; a probe
        # the client could not measure leaves the point unknown.
        return search.reason if search.client_limited else None
    if not result.valid:
        return "the run is not valid: " + "; ".join(result.invalid_because)
    return None


def failed_selfcheck(check: SelfCheck) -> str | None:
    """Why a self-check did not do its job, or None. A high level the client cannot keep up
    with is a finding, not a failure; a level with no answer at all, or no valid level, is."""
    for level in check.levels:
        if level.result.requests_completed == 0:
            return f"{level.concurrency} at once: every request failed; nothing was checked"
    if check.levels and not any(level.valid for level in check.levels):
        return "no level was valid: this machine's client was not right even at the lowest"
    return None


def merge_shard_files(out: Path, shards: list[Path], *, force: bool) -> None:
    """Merge shard results, print the merged tables and write the merged file (also `combine`'s
    path when it is given shard files)."""
    from sagemeter import filekinds
    from sagemeter.atomic import check_output_file
    from sagemeter.loadgen.files import load_result, write_result
    from sagemeter.loadgen.shards import merge_shards
    from sagemeter.loadgen.tables import result_tables
    from sagemeter.printable import SafeConsole

    check_output_file(out, "OUT", force=force, inputs=shards, kind=filekinds.LOAD)
    merged = merge_shards([load_result(path) for path in shards])
    console = SafeConsole()
    for table in result_tables(merged):
        console.print(table)
    for problem in merged.problems:
        console.print(f"problem: {printable(problem)}", highlight=False, markup=False)
    write_result(out, merged)
    console.print(f"wrote {out}", highlight=False)
