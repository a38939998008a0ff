"""Terminal tables for load results and self-checks (rich), kept out of the CLI module."""

from __future__ import annotations

from rich.table import Table

from sagemeter.evidence.distribution import Distribution
from sagemeter.loadgen.result import LoadResult, Probe
from sagemeter.loadgen.selfcheck import LevelCheck


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _spread_row(table: Table, name: str, dist: Distribution) -> None:
    table.add_row(name, _ms(dist.median), _ms(dist.p90), _ms(dist.p99), f"{dist.n:,}")


def result_tables(result: LoadResult) -> list[Table]:
    """Headline figures, then the latency spreads in milliseconds."""
    settings = result.settings
    if result.mode == "closed":
        mode = f"{result.asked_concurrency} at once"
    elif result.mode == "trace":
        mode = f"trace ×{settings.trace_speed:g}"
    elif settings.burstiness != 1.0:
        mode = f"gamma {result.asked_rate:g} req/s, burstiness {settings.burstiness:g}"
    else:
        mode = f"Poisson {result.asked_rate:g} req/s"
    replies = (
        f"{settings.max_tokens} tokens" if result.workload is None else "the workload's lengths"
    )
    head = Table(title=f"load {result.target} ({mode}, {replies})")
    head.add_column("figure")
    head.add_column("value", justify="right")
    awareness = result.self_awareness
    rows = [
        ("output tokens/s (steady window)", _num(result.output_tokens_per_second)),
        ("requests completed / failed", f"{result.requests_completed} / {result.requests_failed}"),
        (
            "reopened (server closed a kept-alive connection)",
            f"{result.requests_reopened} ({result.reopen_lost_s * 1000:.1f} ms lost)",
        ),
        ("output tokens", f"{result.output_tokens:,}"),
        ("achieved concurrency", _num(result.achieved_concurrency, 2)),
        (
            "steady window s",
            f"{result.window.start_s:.2f} → {result.window.end_s:.2f}",
        ),
        ("client CPU s per 1,000 tokens", _num(result.cpu_s_per_1000_tokens, 4)),
        ("client loop lag p99 ms", _ms(awareness.loop_lag_s.p99)),
        (f"send lag p99 ms ({awareness.send_lag_kind})", _ms(awareness.send_lag_s.p99)),
        (
            "workers × loop",
            f"{len(awareness.workers)} × {awareness.workers[0].loop}" if awareness.workers else "-",
        ),
        ("start-up s", f"{awareness.startup_s:.2f}"),
        ("valid", "yes" if result.valid else "NO"),
    ]
    if result.goodput is not None:
        good = result.goodput
        share = "-" if good.share is None else f"{good.share * 100:.1f}%"
        rows.insert(
            4, ("goodput (met SLO) share, req/s", f"{share}, {good.requests_per_second:.2f}")
        )
    if result.knee is not None:
        rows.insert(0, ("sweep knee (concurrency)", str(result.knee.concurrency or "-")))
    for name, value in rows:
        head.add_row(name, value)
    spreads = Table(title="latency ms")
    for column in ("figure", "median", "p90", "p99", "n"):
        spreads.add_column(column, justify="left" if column == "figure" else "right")
    _spread_row(spreads, "TTFT", result.ttft_s)
    _spread_row(spreads, "TPOT", result.tpot_s)
    _spread_row(spreads, "ITL", result.itl_s)
    tables = [head, spreads]
    if result.workload is not None:
        tables.append(workload_table(result))
    if result.sweep:
        sweep = Table(title="sweep")
        for column in ("at once", "tok/s", "rise/doubling", "TTFT ms", "TPOT ms", "valid"):
            sweep.add_column(column, justify="right")
        for level in result.sweep:
            rise = (
                "-" if level.rise_per_doubling is None else f"{level.rise_per_doubling * 100:.1f}%"
            )
            sweep.add_row(
                str(level.concurrency),
                _num(level.output_tokens_per_second),
                rise,
                _ms(level.ttft_median_s),
                _ms(level.tpot_median_s),
                "yes" if level.valid else "no",
            )
        tables.append(sweep)
    if result.slo_search is not None:
        tables.append(search_table(result))
    if result.cluster is not None:
        tables.append(cluster_table(result))
    return tables


def _tokens_row(table: Table, name: str, dist: Distribution | None) -> None:
    if dist is None or not dist.n:
        table.add_row(name, "-", "-", "-", "-", "0")
        return
    table.add_row(
        name, _num(dist.mean), _num(dist.median, 0), _num(dist.p99, 0), _num(dist.max, 0),
        f"{dist.n:,}",
    )  # fmt: skip


def workload_table(result: LoadResult) -> Table:
    """What was sent: asked lengths beside the server's count, and the schedule's lateness."""
    work = result.workload
    assert work is not None
    if work.kind == "trace":
        title = (
            f"trace {work.trace_file}: {work.requests_scheduled} of {work.trace_requests} "
            f"requests ×{work.trace_speed:g}, {work.unique_blocks} blocks, "
            f"{work.block_reuses} reused"
        )
    else:
        title = (
            f"workload: input {work.input_tokens or 'the --prompt'}, output "
            f"{work.output_tokens or 'fixed --max-tokens'}, seed {work.seed}"
        )
    table = Table(title=title)
    for column in ("tokens", "mean", "median", "p99", "max", "n"):
        table.add_column(column, justify="left" if column == "tokens" else "right")
    _tokens_row(table, "input asked", work.asked_input_tokens)
    _tokens_row(table, "input counted by the server", work.counted_input_tokens)
    if work.input_off_by_tokens is not None:
        _tokens_row(table, "|counted − asked| per request", work.input_off_by_tokens)
    _tokens_row(table, "output asked", work.asked_output_tokens)
    captions = []
    if work.sizing is not None and work.sizing.counter == "tokenizer":
        captions.append(
            f"text cut exactly by the tokenizer ({work.sizing.tokenizer}) + the server's "
            f"template {work.sizing.overhead_tokens:.0f} tokens"
        )
    elif work.sizing is not None:
        captions.append(
            f"text sized by the server's count: {work.sizing.tokens_per_word:.3f} tokens/word "
            f"+ {work.sizing.overhead_tokens:.1f}"
        )
    if work.cached_input_tokens is not None:
        captions.append(f"prefix cache served {work.cached_input_tokens:,} prompt tokens")
    late = work.schedule_lateness_s
    if late is not None and late.n:
        captions.append(
            f"sends late against the schedule ms: p50 {_ms(late.median)}, p99 {_ms(late.p99)}, "
            f"max {_ms(late.max)}"
        )
    table.caption = "; ".join(captions)
    return table


def _load(probe: Probe) -> str:
    return f"{probe.concurrency} at once" if probe.rate is None else f"{probe.rate:g} req/s"


def probe_line(probe: Probe, percentile: float) -> str:
    """One progress line per probe: `probe 4 at once: meets the SLO (TTFT p99 …)`."""
    verdict = "meets the SLO" if probe.passed else "misses" if probe.judged else "no verdict"
    return f"probe {_load(probe)}: {verdict} ({probe.why})"


def search_table(result: LoadResult) -> Table:
    """The operating point found, its cost, and every probe of the search."""
    search = result.slo_search
    assert search is not None
    point = result.operating_point
    name = f"p{search.percentile:g}"
    slos = ", ".join(
        f"{label} {name} ≤ {slo * 1e3:g} ms"
        for label, slo in (("TTFT", search.slo_ttft_s), ("TPOT", search.slo_tpot_s))
        if slo is not None
    )
    table = Table(title=f"operating point ({slos})")
    for column in ("load", "requests", "tok/s", f"TTFT {name} ms", f"TPOT {name} ms", "SLO"):
        table.add_column(column, justify="right")
    for probe in search.probes:
        verdict = (
            "met"
            if probe.passed
            else "missed, stopped early"
            if probe.stopped_early
            else "missed"
            if probe.judged
            else "no verdict"
        )
        table.add_row(
            _load(probe),
            str(probe.requests_counted),
            _num(probe.output_tokens_per_second),
            _ms(probe.ttft_s),
            _ms(probe.tpot_s),
            verdict,
        )
    caption = search.reason
    if point is not None:
        usd = point.usd_per_million_tokens
        cost = (
            f"${usd:,.4g} per M output tokens"
            if usd is not None
            else f"no $/M ({point.usd_per_million_tokens_why})"
        )
        caption += f". At it: {point.output_tokens_per_second:,.1f} output tokens/s, {cost}"
    table.caption = caption
    return table


def cluster_table(result: LoadResult) -> Table:
    """Which node saw what: its workers and load, its clock against the driver's, its figures."""
    cluster = result.cluster
    assert cluster is not None
    table = Table(title=f"Ray cluster {cluster.address} (Ray {cluster.ray_version})")
    for column in ("node", "workers", "load", "clock ms", "done / failed", "tok/s", "TTFT ms"):
        table.add_column(column, justify="left" if column == "node" else "right")
    table.add_column("state")
    for node in cluster.nodes:
        load = f"{len(node.streams)} streams" if node.streams else f"{node.arrivals} arrivals"
        state = "LOST" if node.lost is not None else ("valid" if node.valid else "invalid")
        table.add_row(
            f"{node.node} {node.address}",
            str(len(node.workers)),
            load,
            f"{node.clock.offset_s * 1e3:+.2f} ±{node.clock.remaining_error_s * 1e3:.2f}",
            f"{node.requests_completed} / {node.requests_failed}",
            _num(node.output_tokens_per_second, 0),
            _ms(node.ttft_median_s),
            state,
        )
    return table


def level_table(check: LevelCheck) -> Table:
    """One self-check level: truth, measured, error, and the client's own figures."""
    table = Table(title=f"{check.concurrency} at once")
    for column in ("figure", "truth", "measured", "error %"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for figure in check.figures:
        seconds = figure.name.endswith(" s")
        name = figure.name[:-2] + " ms" if seconds else figure.name

        def show(value: float | None, seconds: bool = seconds) -> str:
            return _ms(value) if seconds else _num(value)

        error = "-" if figure.error_pct is None else f"{figure.error_pct:+.2f}"
        table.add_row(name, show(figure.truth), show(figure.measured), error)
    server = "-" if check.server_cpu_share is None else f"{check.server_cpu_share:.2f} core"
    table.add_row("client CPU s / 1,000 tokens", "", _num(check.cpu_s_per_1000_tokens, 4), "")
    table.add_row("client loop lag p99 ms", "", _ms(check.loop_lag_p99_s), "")
    table.add_row(
        "achieved concurrency", str(check.concurrency), _num(check.achieved_concurrency, 2), ""
    )
    table.add_row("truth server CPU", "", server, "")
    if check.server_write_lateness_s is not None:
        table.add_row(
            "truth server writes late by (mean) ms", "0", _ms(check.server_write_lateness_s), ""
        )
    verdict = "valid" if check.valid else "INVALID: " + "; ".join(check.invalid_because)
    table.caption = verdict
    return table


def level_tables(check: LevelCheck) -> list[Table]:
    """A self-check level's table, and which node saw what when it ran on a Ray cluster."""
    tables = [level_table(check)]
    if check.result.cluster is not None:
        tables.append(cluster_table(check.result))
    return tables
