"""`sagemeter load` and `sagemeter selfcheck`, and the merge of shard files that `combine` does
(thin faces over `sagemeter.loadgen`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sagemeter.errors import UserError
from sagemeter.printable import printable

if TYPE_CHECKING:
    from sagemeter.loadgen.result import LoadResult
    from sagemeter.loadgen.selfcheck import SelfCheck
    from sagemeter.loadgen.sessions import SessionPlan


def _duration(text: str | None, flag: str) -> float | None:
    if text is None:
        return None
    from sagemeter.calibrate.timing import parse_duration

    return parse_duration(text, flag)


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
    """Add `load` and `selfcheck` to the main CLI (`combine` merges shard files)."""

    @app.command()
    def load(
        target: Annotated[
            str,
            typer.Argument(
                help="http://HOST:PORT (with /v1 or not), or a server sagemeter starts for the "
                'run: local:CHECKPOINT, vllm:CHECKPOINT, cmd:"COMMAND --port {port}"'
            ),
        ],
        concurrency: Annotated[
            int, typer.Option("--concurrency", "-c", help="streams at once (closed loop)")
        ] = 16,
        max_tokens: Annotated[int, typer.Option(help="tokens asked per reply")] = 256,
        duration: Annotated[
            str | None,
            typer.Option(
                help="sending time, e.g. 10s or 500ms [10s; a --trace: all of it]",
                show_default=False,
            ),
        ] = None,
        workers: Annotated[
            int | None, typer.Option(help="client processes [cores]", show_default=False)
        ] = None,
        out: Annotated[Path | None, typer.Option(help="write the result JSON here")] = None,
        force: Annotated[
            bool, typer.Option(help="replace --out and --csv if they already exist")
        ] = False,
        csv: Annotated[
            Path | None,
            typer.Option(
                help="write one row per request here (stream, index, send, TTFT, end, tokens, "
                "status, error)",
                show_default=False,
            ),
        ] = None,
        rate: Annotated[
            float | None, typer.Option(help="Poisson arrivals per second (open loop)")
        ] = None,
        seed: Annotated[
            int, typer.Option(help="seed of the schedule, the drawn lengths and a trace's text")
        ] = 0,
        trace: Annotated[
            Path | None,
            typer.Option(
                help="replay a Mooncake JSONL trace (timestamp ms, input_length, "
                "output_length, hash_ids) at its own times (open loop)",
                show_default=False,
            ),
        ] = None,
        trace_speed: Annotated[
            float, typer.Option(help="--trace time scale: 2 sends twice as fast")
        ] = 1.0,
        input_tokens: Annotated[
            str | None,
            typer.Option(
                help="prompt lengths (server's tokens): fixed:N, uniform:A,B, normal:MEAN,SD, "
                "lognormal:MEAN,SD",
                show_default=False,
            ),
        ] = None,
        tokenizer: Annotated[
            Path | None,
            typer.Option(
                help="cut --trace and --input-tokens prompts to exact lengths with the model's "
                "own tokenizer: a local .gguf or a folder holding tokenizer.json (never a Hub "
                "name: nothing is downloaded); the chat template's tokens still come from the "
                "server's count",
                show_default=False,
            ),
        ] = None,
        output_tokens: Annotated[
            str | None,
            typer.Option(
                help="reply lengths (max_tokens, ignore_eos), same forms [--max-tokens]",
                show_default=False,
            ),
        ] = None,
        burstiness: Annotated[
            float,
            typer.Option(
                help="--rate arrivals: gamma gaps of this shape; 1 is Poisson, <1 burstier"
            ),
        ] = 1.0,
        sweep: Annotated[
            bool, typer.Option("--sweep", help="1, 2, 4, … up to --concurrency; find the knee")
        ] = False,
        slo_ttft: Annotated[
            str | None, typer.Option(help="goodput SLO on TTFT, e.g. 200ms")
        ] = None,
        slo_tpot: Annotated[str | None, typer.Option(help="goodput SLO on TPOT, e.g. 10ms")] = None,
        search: Annotated[
            str | None,
            typer.Option(
                help="find the operating point: the largest `concurrency` (up to --concurrency) "
                "or `rate` (from --rate) that meets every SLO at --slo-percentile",
                show_default=False,
            ),
        ] = None,
        slo_percentile: Annotated[
            float, typer.Option(help="the percentile every SLO holds at: 50, 90 or 99")
        ] = 99.0,
        price_per_hour: Annotated[
            float | None,
            typer.Option(
                help="USD per hour of the endpoint: $/M output tokens at the operating point",
                show_default=False,
            ),
        ] = None,
        sessions: Annotated[
            int | None,
            typer.Option(
                help="multi-turn conversations: this many sessions at once, each sending its "
                "conversation so far every turn (closed loop per session)",
                show_default=False,
            ),
        ] = None,
        turns: Annotated[int, typer.Option(help="with --sessions: turns per session")] = 2,
        think_time: Annotated[
            str,
            typer.Option(help="with --sessions: wait after a reply, fixed:2s or uniform:1s,3s"),
        ] = "fixed:0s",
        shard: Annotated[
            str | None, typer.Option(help="i/n: run the i-th (from 0) of n shards")
        ] = None,
        start_at: Annotated[
            float | None, typer.Option(help="common start instant, Unix seconds (for shards)")
        ] = None,
        api: Annotated[str, typer.Option(help="chat or completions")] = "chat",
        model: Annotated[str | None, typer.Option(help="model name [the server's first]")] = None,
        prompt: Annotated[str | None, typer.Option(help="the prompt sent")] = None,
        timeout: Annotated[str, typer.Option(help="per-request limit")] = "300s",
        startup_timeout: Annotated[
            str | None,
            typer.Option(
                help="local:, vllm:, cmd: targets: the longest wait for the server to answer "
                "[the engine's own; cmd: 10m]",
                show_default=False,
            ),
        ] = None,
        raw: Annotated[bool, typer.Option("--raw", help="keep every request's timing")] = False,
        uvloop: Annotated[bool, typer.Option(help="use uvloop when installed")] = True,
        ray: Annotated[
            str | None,
            typer.Option(
                help="run the workers on a Ray cluster: auto, local, ray://HOST:PORT or "
                "HOST:PORT (--workers then counts per node)",
                show_default=False,
            ),
        ] = None,
        api_key: Annotated[
            str | None,
            typer.Option(envvar="OPENAI_API_KEY", help="bearer token", show_default=False),
        ] = None,
    ) -> None:
        """Load an OpenAI-compatible server and measure it, checking the client kept up.

        A server target (local:, vllm:, cmd:) is started first (and stopped after), as
        measure's are.
        """
        # The options as given, to run again on an engine's URL (`load` itself is a free name).
        arguments = {key: value for key, value in locals().items() if key != "load"}
        from sagemeter.cli.common import err_console
        from sagemeter.cli.live import LiveRuns, progress_mode

        watch = LiveRuns(err_console, progress_mode(err_console))  # a bad value: before work
        started = time.perf_counter()
        from rich.markup import escape

        from sagemeter.loadgen.files import write_result
        from sagemeter.loadgen.loadrun import run_once
        from sagemeter.loadgen.schedule import parse_shard
        from sagemeter.loadgen.settings import LoadSettings
        from sagemeter.loadgen.sweep import run_sweep
        from sagemeter.loadgen.tables import result_tables
        from sagemeter.printable import SafeConsole
        from sagemeter.transport.request import DEFAULT_PROMPT

        def checked_settings(url: str) -> LoadSettings:
            """Every option checked (before an engine is started for an engine target); the
            URL kept as its base with /v1, as every command records a server."""
            from sagemeter.targets import http_target

            url = http_target(url).base_url
            from sagemeter.transport.request import check_api_key

            check_api_key(api_key, "--api-key (or OPENAI_API_KEY)")
            from sagemeter import filekinds
            from sagemeter.atomic import check_distinct_outputs, check_output_file

            given = [path for path in (trace, tokenizer) if path is not None]
            if out is not None:  # a shard's file replaces only a shard's (with --force)
                kind = filekinds.SHARD if shard is not None else filekinds.LOAD
                check_output_file(out, "--out", force=force, inputs=given, kind=kind)
            if csv is not None:
                check_distinct_outputs([("--out", out), ("--csv", csv)])
                check_output_file(csv, "--csv", force=force, inputs=given)
            if ray is not None:
                _check_ray(ray)
                if shard is not None or start_at is not None:
                    raise UserError(
                        "--ray spreads one run over the cluster; leave out --shard and --start-at"
                    )
            if search not in (None, "concurrency", "rate"):
                raise UserError(f"--search {search!r}: give concurrency or rate")
            if search is not None and ray is not None:
                raise UserError("--search runs its probes on this machine; leave out --ray")
            if api not in ("chat", "completions"):
                raise UserError(f"--api {api!r}: give chat or completions")
            workload = trace is not None or input_tokens is not None or output_tokens is not None
            if prompt is not None and (trace is not None or input_tokens is not None):
                raise UserError(
                    "--prompt is the one prompt sent; --trace and --input-tokens build their own, "
                    "so give one of them"
                )
            if workload and ray is not None:
                raise UserError(
                    "--trace, --input-tokens and --output-tokens run on this machine; leave out "
                    "--ray"
                )
            if duration is not None:
                seconds = _duration(duration, "--duration") or 0.0
            elif trace is not None:
                from sagemeter.loadgen.trace import read_trace_cached

                span = read_trace_cached(trace).span_s
                seconds = max(span / trace_speed, 0.001) if trace_speed > 0 else 1.0
            else:
                seconds = 10.0
            shard_index, shard_count = parse_shard(shard) if shard is not None else (0, 1)
            if sessions is None and (turns != 2 or think_time != "fixed:0s"):
                raise UserError("--turns and --think-time shape --sessions; give --sessions N")
            if sessions is not None and ray is not None:
                raise UserError(
                    "--sessions runs its conversations on this machine; leave out --ray"
                )
            checked = LoadSettings(
                target=url,
                api="chat" if api == "chat" else "completions",
                model=model,
                prompt=prompt if prompt is not None else DEFAULT_PROMPT,
                max_tokens=max_tokens,
                concurrency=concurrency,
                rate=rate,
                duration_s=seconds,
                seed=seed,
                trace=None if trace is None else str(trace),
                trace_speed=trace_speed,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                burstiness=burstiness,
                tokenizer=None if tokenizer is None else str(tokenizer),
                workers=workers,
                sweep=sweep,
                slo_ttft_s=_duration(slo_ttft, "--slo-ttft"),
                slo_tpot_s=_duration(slo_tpot, "--slo-tpot"),
                search=search,
                slo_percentile=slo_percentile,
                price_per_hour=price_per_hour,
                shard_index=shard_index,
                shard_count=shard_count,
                start_at=start_at,
                timeout_s=_duration(timeout, "--timeout") or 0.0,
                raw=raw or csv is not None,  # the CSV's rows are the raw records
                prefer_uvloop=uvloop,
            )
            if sessions is not None:
                from sagemeter.loadgen.sessions import check_session_settings

                session_plan()  # bad --sessions, --turns or --think-time: before any work
                checked = checked.model_copy(update={"concurrency": sessions})
                check_session_settings(checked)
            return checked.checked()

        def session_plan() -> SessionPlan:
            from sagemeter.loadgen.sessions import SessionPlan, parse_think_time

            assert sessions is not None
            return SessionPlan(sessions, turns, parse_think_time(think_time)).checked()

        from sagemeter.targets import ENGINE_PREFIX, EngineTarget, parse_target

        if ENGINE_PREFIX.match(target.strip()) and isinstance(parse_target(target), EngineTarget):
            # A server target: the options are checked first, then the server is started for
            # the load (a slot per stream for the embedded engine) and stopped after it.
            checked_settings("http://127.0.0.1:1")
            from sagemeter.cli.engines import run_on_engine

            wait = (
                None if startup_timeout is None else _duration(startup_timeout, "--startup-timeout")
            )
            run_on_engine(
                target,
                max_tokens,
                sessions or concurrency,  # a slot per stream, or per session
                lambda url: load(**{**arguments, "target": url}),
                startup_timeout_s=wait,
                api_key=api_key,
            )
            return
        settings = checked_settings(target)
        from sagemeter.cli import interrupt as activity

        activity.doing(f"loading {target}")

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
            if sessions is not None:
                from sagemeter.loadgen.sessions import run_sessions

                plan = session_plan()
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
                    lambda level: watched.run(
                        lambda one: run_level(one, time.perf_counter()), level
                    ),
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
        if csv is not None:
            from sagemeter.loadgen.request_csv import without_raw, write_request_csv

            rows = write_request_csv(csv, result)
            console.print(f"wrote {csv} ({rows} requests)", highlight=False)
            if not raw:
                result = without_raw(result)
        if out is not None:
            before = time.perf_counter()
            write_result(out, result)
            console.print(f"wrote {out} ({time.perf_counter() - before:.3f} s)", highlight=False)
        if result.cluster is not None and result.cluster.lost_nodes:
            raise typer.Exit(3)  # a node's requests are missing: the figures are not the run asked
        why = failed_run(result)
        if why is not None:
            SafeConsole(stderr=True).print(f"[yellow]incomplete:[/] {escape(why)}", highlight=False)
            raise typer.Exit(3)

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
