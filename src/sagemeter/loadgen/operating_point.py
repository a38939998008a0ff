"""The operating point: the largest load at which every SLO holds at its percentile, and its cost.

A user with a latency target (TTFT p99 ≤ 500 ms, TPOT p99 ≤ 50 ms) asks how much load an endpoint
takes and what a million tokens cost there. The search probes loads (streams at once, or Poisson
arrivals per second): doubling from the first until a probe misses, then bisecting between the
last that met the SLO and the first that did not (to one stream; a rate to RATE_PRECISION).

Each probe is long enough for its percentile: its steady window counts at least `min_requests`
(100 for p99; a probe found too short, measured or not, is run again, longer; still too short
after every try, it is no verdict: the search ends there as for a probe the client could not
measure, never with the probe called a miss). A probe that already fails stops
early: once more requests missed the SLO than the percentile allows of the whole probe, the
workers stop sending (transport/slo_stop.py). A probe the client could not measure (invalid: the
client, not the server, fell behind) is run again; still invalid, it ends the search with no
operating point, since the point could lie above it. The price is $/M output tokens at the point
found: --price-per-hour / tokens per hour.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from sagemeter.evidence.distribution import Distribution
from sagemeter.loadgen.identity import ServerChanged
from sagemeter.loadgen.result import LoadResult, OperatingPoint, Probe, RawRecord, SloSearch
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.transport.health import client_limits
from sagemeter.transport.slo_stop import SloStop, misses

MIN_PROBE_REQUESTS = 10  # even a median is not judged on fewer
RATE_PRECISION = 0.05  # a rate search stops when the bracket is this narrow (relative)
RATE_DOUBLINGS = 12
RATE_HALVINGS = 6
TRIES = 3  # a probe too short for its percentile is run again, longer
LENGTH_MARGIN = 1.25  # a probe's planned length over its estimate

RunProbe = Callable[[LoadSettings, SloStop], LoadResult]
OnProbe = Callable[[Probe], None]


class Unmeasurable(Exception):
    """A probe the client could not measure, however often tried: the search cannot go on."""


def min_requests(percentile: float) -> int:
    """Requests a probe's percentile needs: 100/(100 − p), so p99 sees at least one miss's
    worth (100 requests), and never fewer than MIN_PROBE_REQUESTS."""
    return max(MIN_PROBE_REQUESTS, math.ceil(100.0 / (100.0 - percentile) - 1e-9))


def allowed_misses(requests: int, percentile: float) -> int:
    """Misses a probe of `requests` can have and still meet its percentile."""
    return math.floor(requests * (100.0 - percentile) / 100.0 + 1e-9)


def at_percentile(dist: Distribution, percentile: float) -> float | None:
    return {50.0: dist.median, 90.0: dist.p90, 99.0: dist.p99}[percentile]


def usd_per_million(
    price_per_hour: float | None, tokens_per_second: float
) -> tuple[float | None, str | None]:
    """$ per million output tokens at `tokens_per_second`, or None with the reason."""
    if price_per_hour is None:
        return None, "no --price-per-hour given"
    if tokens_per_second <= 0:
        return None, "no output tokens were measured at the operating point"
    return price_per_hour / (tokens_per_second * 3600.0) * 1e6, None


def client_kept_up(result: LoadResult) -> bool:
    """Whether the client kept up (its loop and CPU), whatever else a probe stopped early
    misses: a stop leaves streams with one request and an unsteady window, which would make it
    invalid, while its misses are the server's as long as the client kept up."""
    awareness = result.self_awareness
    shares = [worker.cpu_share for worker in awareness.workers]
    lag = awareness.loop_lag_s.p99
    return not client_limits(lag, shares, awareness.client_cpu_share_of_cores)


def raw_misses(records: list[RawRecord], stop: SloStop) -> int:
    """The misses a probe's workers counted, recounted from its records by the same rule."""
    count = 0
    for record in records:
        first = record.first_us
        arrivals = [] if first is None else [first * 1e-6, (first + sum(record.gaps_us)) * 1e-6]
        tokens = record.usage_tokens if record.usage_tokens is not None else len(record.gaps_us) + 1
        count += misses(stop, record.error is not None, record.send_us * 1e-6, arrivals, tokens)
    return count


@dataclass
class Search:
    """One search: its settings, the probe runner, what it has learnt so far."""

    settings: LoadSettings
    run_probe: RunProbe
    on_probe: OnProbe | None = None
    probes: list[Probe] = field(default_factory=list)
    results: dict[float, LoadResult] = field(default_factory=dict)
    cycle_s: float | None = None  # seconds per request per stream, as last seen

    @property
    def needed(self) -> int:
        return min_requests(self.settings.slo_percentile)

    @property
    def by_rate(self) -> bool:
        return self.settings.search == "rate"

    def planned_length(self, load: float) -> float:
        """Seconds a probe at `load` needs for `needed` requests in its steady window."""
        shortest = self.settings.duration_s
        cycle = self.cycle_s
        if self.by_rate:
            return max(shortest, self.needed / load * LENGTH_MARGIN + 2 * (cycle or 0.0))
        if cycle is None:
            return shortest
        return max(shortest, cycle * (self.needed / load + 2) * LENGTH_MARGIN)

    def expected_requests(self, load: float, length_s: float) -> int:
        """Requests a probe of `length_s` should send at `load` (at least `needed`)."""
        if self.by_rate:
            return max(self.needed, math.floor(load * length_s))
        if self.cycle_s is None:
            return self.needed
        return max(self.needed, math.floor(load * length_s / self.cycle_s))

    def long_enough(self, result: LoadResult) -> bool:
        """Whether a probe's steady window holds the requests its percentile needs (a run with
        no steady span counts the whole run: never enough, however many)."""
        window = result.window
        return window.steady and window.requests_counted >= self.needed

    def learn(self, result: LoadResult) -> None:
        """The time one request took a stream, from a probe's steady window."""
        window = result.window
        counted = window.requests_counted
        if counted and window.end_s > window.start_s:
            streams = result.achieved_concurrency or 1.0
            self.cycle_s = (window.end_s - window.start_s) * streams / counted

    def probe(self, load: float) -> bool:
        """Run one probe (again, longer, while too short for its percentile); True if it met
        every SLO."""
        settings = self.settings
        length = self.planned_length(load)
        update: dict[str, object] = {"search": None, "sweep": False, "raw": True}
        if self.by_rate:
            update["rate"] = load
        else:
            update["concurrency"] = int(load)
        unmeasured: list[str] = []  # the reasons of the tries the client could not measure
        for attempt in range(TRIES):
            expected = self.expected_requests(load, length)
            stop = SloStop(
                settings.slo_ttft_s,
                settings.slo_tpot_s,
                allowed_misses(expected, settings.slo_percentile),
            )
            level = settings.model_copy(update={**update, "duration_s": length})
            try:
                result = self.run_probe(level, stop)
            except ServerChanged as exc:  # kept (invalid) should no probe before it be
                self.results.setdefault(load, exc.result)
                raise
            if result.valid:  # a stopped or unmeasured probe's window says little of the pace
                self.learn(result)
            missed = raw_misses(result.raw.records, stop) if result.raw is not None else 0
            stopped = missed > stop.after_misses
            enough = self.long_enough(result)
            measured = client_kept_up(result) if stopped else result.valid
            if not measured:
                why = "; ".join(result.invalid_because) or "the client fell behind"
                unmeasured.append(f"try {attempt + 1}: {why}")
            if attempt == TRIES - 1 or (measured and (stopped or enough)):
                break
            if not enough:  # too short for its percentile, measured or not: longer
                length = max(self.planned_length(load), length * 2)
        kept = result if settings.raw else result.model_copy(update={"raw": None})
        self.results[load] = kept
        probe = self.judged(load, length, result, stopped and measured, missed, stop)
        self.probes.append(probe)
        if self.on_probe is not None:
            self.on_probe(probe)
        if not measured:
            raise Unmeasurable(f"{self.load_text(load)} ({probe.why})")
        if not stopped and not enough:
            # Too short for its percentile after every try: no verdict, never a miss.
            before = f"; the tries before it: {'; '.join(unmeasured)}" if unmeasured else ""
            raise Unmeasurable(
                f"{self.load_text(load)} long enough ({probe.why} after {TRIES} tries{before})"
            )
        return probe.passed

    def load_text(self, load: float) -> str:
        return f"{load:g} requests/s" if self.by_rate else f"{int(load)} at once"

    def judged(
        self,
        load: float,
        length: float,
        result: LoadResult,
        stopped: bool,
        missed: int,
        stop: SloStop,
    ) -> Probe:
        settings = self.settings
        p = settings.slo_percentile
        ttft = at_percentile(result.ttft_s, p)
        tpot = at_percentile(result.tpot_s, p)
        counted = result.window.requests_counted
        name = f"p{p:g}"
        why: list[str] = []
        if stopped:
            why.append(
                f"stopped early: {missed} requests missed the SLO, more than the "
                f"{stop.after_misses} that {name} allows"
            )
        elif not result.valid:
            why.append("the client could not measure it: " + "; ".join(result.invalid_because))
        elif counted < self.needed:
            why.append(f"{counted} requests in the steady window, {name} needs {self.needed}")
        else:
            if result.requests_failed > allowed_misses(counted, p):
                why.append(f"{result.requests_failed} requests failed")
            for label, value, slo in (
                ("TTFT", ttft, settings.slo_ttft_s),
                ("TPOT", tpot, settings.slo_tpot_s),
            ):
                if slo is None:
                    continue
                if value is None:
                    why.append(f"no {label} was measured")
                elif value > slo:
                    why.append(f"{label} {name} {value * 1e3:.1f} ms > {slo * 1e3:g} ms")
        passed = not why
        if passed:
            held = [
                f"{label} {name} {value * 1e3:.1f} ms ≤ {slo * 1e3:g} ms"
                for label, value, slo in (
                    ("TTFT", ttft, settings.slo_ttft_s),
                    ("TPOT", tpot, settings.slo_tpot_s),
                )
                if slo is not None and value is not None
            ]
            why.append("; ".join(held))
        return Probe(
            concurrency=None if self.by_rate else int(load),
            rate=load if self.by_rate else None,
            duration_s=length,
            requests_counted=counted,
            requests_failed=result.requests_failed,
            ttft_s=ttft,
            tpot_s=tpot,
            output_tokens_per_second=result.output_tokens_per_second,
            goodput_share=result.goodput.share if result.goodput else None,
            valid=result.valid,
            stopped_early=stopped,
            passed=passed,
            judged=stopped or (result.valid and self.long_enough(result)),
            why="; ".join(why),
        )

    def last_why(self, load: float | None) -> str:
        for probe in self.probes:
            if load is not None and (probe.rate or probe.concurrency) == load:
                return probe.why
        return ""


def _by_concurrency(search: Search) -> tuple[float | None, str]:
    """Doubling from 1 up to --concurrency, then bisection to one stream."""
    ceiling = search.settings.concurrency
    low, high, level = 0, 0, 1
    while True:
        if not search.probe(level):
            high = level
            break
        low = level
        if level >= ceiling:
            break
        level = min(level * 2, ceiling)
    while high and high - low > 1:
        middle = (low + high) // 2
        if search.probe(middle):
            low = middle
        else:
            high = middle
    if not low:
        return None, f"even 1 at once misses the SLO ({search.last_why(1)})"
    if not high:
        return low, (
            f"{low} at once still meets the SLO at the ceiling: raise --concurrency to search "
            "higher"
        )
    return low, f"{low} at once meets every SLO; {high} at once does not ({search.last_why(high)})"


def _by_rate(search: Search) -> tuple[float | None, str]:
    """Doubling (or halving) from --rate, then bisection to RATE_PRECISION."""
    start = search.settings.rate or 1.0
    low: float | None = None
    high: float | None = None
    if search.probe(start):
        low = rate = start
        for _ in range(RATE_DOUBLINGS):
            rate *= 2
            if not search.probe(rate):
                high = rate
                break
            low = rate
    else:
        high = rate = start
        for _ in range(RATE_HALVINGS):
            rate /= 2
            if search.probe(rate):
                low = rate
                break
            high = rate
    while low is not None and high is not None and (high - low) / low > RATE_PRECISION:
        middle = (low + high) / 2
        if search.probe(middle):
            low = middle
        else:
            high = middle
    if low is None:
        return None, f"even {high:g} requests/s misses the SLO ({search.last_why(high)})"
    if high is None:
        return low, f"{low:g} requests/s still meets the SLO after {RATE_DOUBLINGS} doublings"
    return low, (f"{low:g} requests/s meets every SLO; {high:g} does not ({search.last_why(high)})")


def search_operating_point(
    settings: LoadSettings,
    run_probe: RunProbe,
    wall_s: Callable[[], float],
    on_probe: OnProbe | None = None,
) -> LoadResult:
    """Search, then the result of the operating point's probe (or of the lowest probe when no
    load met the SLO) with `operating_point` and `slo_search` filled in."""
    search = Search(settings, run_probe, on_probe)
    point: float | None
    limited = False
    try:
        point, reason = _by_rate(search) if search.by_rate else _by_concurrency(search)
    except Unmeasurable as exc:
        passed = [p for p in search.probes if p.passed]
        below = (
            f"; {search.load_text(max(p.rate or p.concurrency or 0 for p in passed))} met it, "
            "but the point may lie higher"
            if passed
            else ""
        )
        point, reason = None, f"the client could not measure {exc}{below}"
        limited = True
    except ServerChanged as exc:  # no probe after it: the point is unknown
        point, reason = None, f"the search stopped: {exc.reason}"
        limited = True
    chosen = search.results[point] if point is not None else search.results[min(search.results)]
    operating: OperatingPoint | None = None
    if point is not None:
        usd, usd_why = usd_per_million(settings.price_per_hour, chosen.output_tokens_per_second)
        operating = OperatingPoint(
            concurrency=None if search.by_rate else int(point),
            rate=point if search.by_rate else None,
            output_tokens_per_second=chosen.output_tokens_per_second,
            ttft_s=chosen.ttft_s,
            tpot_s=chosen.tpot_s,
            goodput=chosen.goodput,
            usd_per_million_tokens=usd,
            usd_per_million_tokens_why=usd_why,
        )
    record = SloSearch(
        search="rate" if search.by_rate else "concurrency",
        slo_ttft_s=settings.slo_ttft_s,
        slo_tpot_s=settings.slo_tpot_s,
        percentile=settings.slo_percentile,
        min_requests=search.needed,
        price_per_hour=settings.price_per_hour,
        found=point is not None,
        client_limited=limited,
        reason=reason,
        probes=search.probes,
    )
    return chosen.model_copy(
        update={
            "settings": settings.model_copy(update={"model": chosen.settings.model}),
            "operating_point": operating,
            "slo_search": record,
            "wall_s": wall_s(),
        }
    )
