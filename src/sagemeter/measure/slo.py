"""The cost at your SLO, as a phase of a measurement: a plan's `[slo]` table, searched per arm.

A plan that gives `[slo]` (ttft, tpot, percentile, max_tokens, search, and a workload's
input_tokens, output_tokens, burstiness) has each arm's endpoint
searched for its operating point after the article's phases (`sagemeter load --search`, on the
same server while it still runs), and the arm's result gets `slo_concurrency` (or `slo_rate`),
`slo_tokens_per_second` and `usd_per_million_tokens_at_slo` at its top level, with every probe in
`slo_search`. An endpoint the load generator cannot reach over plain HTTP (SageMaker's runtime
API) gets null figures and the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sagemeter.calibrate.timing import duration_field
from sagemeter.errors import UserError
from sagemeter.limits import MAX_TOKENS, MAX_WAIT_S
from sagemeter.loadgen.lengths import parse_lengths
from sagemeter.measure.identity import IdentityWatch

DEFAULT_CEILING = 64


class SloOptions(BaseModel):
    """`[slo]`: the latency target every arm is searched against."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    ttft: float | None = Field(
        None, gt=0, le=MAX_WAIT_S, description='TTFT SLO: seconds, or e.g. "500ms"'
    )
    tpot: float | None = Field(
        None, gt=0, le=MAX_WAIT_S, description='TPOT SLO: seconds, or e.g. "50ms"'
    )
    percentile: float = Field(99.0, description="50, 90 or 99")
    max_tokens: int = Field(
        256, ge=1, le=MAX_TOKENS, description="tokens asked per reply in the probes"
    )
    search: Literal["concurrency", "rate"] = "concurrency"
    concurrency: int = Field(
        DEFAULT_CEILING, ge=1, le=4096, description="the highest streams at once searched"
    )
    rate: float | None = Field(
        None, gt=0, le=1e6, description="search = rate: the first rate tried"
    )
    duration: float = Field(
        10.0, gt=0, le=MAX_WAIT_S, description="the shortest probe: seconds or e.g. 5s"
    )
    input_tokens: str | None = Field(
        None, description='prompt lengths drawn per request, e.g. "lognormal:800,400"'
    )
    output_tokens: str | None = Field(
        None, description='reply lengths drawn per request, e.g. "uniform:32,256"'
    )
    burstiness: float = Field(
        1.0, gt=0, le=1000, description="search = rate: gamma shape of the gaps"
    )

    @field_validator("ttft", "tpot", "duration", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return duration_field(value)

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _lengths(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_lengths(value, "")
            except UserError as exc:
                raise ValueError(str(exc).strip()) from None
        return value

    @model_validator(mode="after")
    def _complete(self) -> SloOptions:
        if self.ttft is None and self.tpot is None:
            raise ValueError("give ttft, tpot or both (the latency target searched against)")
        if self.percentile not in (50.0, 90.0, 99.0):
            raise ValueError(f"percentile {self.percentile:g}: give 50, 90 or 99")
        if self.search == "rate" and self.rate is None:
            raise ValueError("search = rate starts at `rate`: give the first rate to try")
        if self.burstiness != 1.0 and self.search != "rate":
            raise ValueError("burstiness shapes the arrivals of search = rate")
        return self


class SloFigures(BaseModel):
    """What the search adds to an arm's result (top-level keys), and the search itself."""

    slo_concurrency: int | None = None
    slo_rate: float | None = None
    slo_tokens_per_second: float | None = None
    usd_per_million_tokens_at_slo: float | None = None
    slo_note: str | None = Field(None, description="why the figures above are null")
    slo_search: dict[str, Any] | None = None


def search_slo(
    http_root: str | None,
    options: SloOptions,
    price_per_hour: float | None,
    api_key: str | None = None,
    between_probes: Callable[[], None] | None = None,
    watch: IdentityWatch | None = None,
) -> SloFigures:
    """Search the operating point of the server at `http_root` (blocking: worker processes).
    `between_probes` is called after each probe (it raises to stop the search there); `watch`,
    the measurement's server identity, is checked after each probe (a change stops the search)."""
    if http_root is None:
        return SloFigures(
            slo_note="not searched: the load generator reaches plain HTTP endpoints only "
            "(this one answers through a cloud runtime API)"
        )
    # The load generator (its workers, schedules, result models) loads only for an SLO search:
    # `sagemeter --help` and every measurement without --slo-ttft/--slo-tpot start without it.
    from sagemeter.loadgen import identity, loadrun, operating_point, settings

    load_settings = settings.LoadSettings(
        target=http_root,
        max_tokens=options.max_tokens,
        concurrency=options.concurrency,
        rate=options.rate if options.search == "rate" else None,
        duration_s=options.duration,
        slo_ttft_s=options.ttft,
        slo_tpot_s=options.tpot,
        search=options.search,
        slo_percentile=options.percentile,
        price_per_hour=price_per_hour,
        input_tokens=options.input_tokens,
        output_tokens=options.output_tokens,
        burstiness=options.burstiness,
    ).checked()
    started = time.perf_counter()
    runs = identity.WatchedRuns(watch or IdentityWatch(None))  # None: not watched here
    result = operating_point.search_operating_point(
        load_settings,
        lambda level, stop: runs.run(
            lambda probe: loadrun.run_once(probe, time.perf_counter(), api_key, None, stop), level
        ),
        lambda: time.perf_counter() - started,
        on_probe=(lambda _probe: between_probes()) if between_probes is not None else None,
    )
    search = result.slo_search
    point = result.operating_point
    record = search.model_dump(mode="json") if search is not None else None
    if point is None:
        reason = search.reason if search is not None else "no operating point"
        return SloFigures(slo_note=f"no load met the SLO: {reason}", slo_search=record)
    return SloFigures(
        slo_concurrency=point.concurrency,
        slo_rate=point.rate,
        slo_tokens_per_second=point.output_tokens_per_second,
        usd_per_million_tokens_at_slo=point.usd_per_million_tokens,
        slo_note=None
        if point.usd_per_million_tokens is not None
        else point.usd_per_million_tokens_why,
        slo_search=record,
    )
