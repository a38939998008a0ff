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
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sagemeter.measure.identity import IdentityWatch

if TYPE_CHECKING:  # the options are declared above this layer (sagemeter.options.slo)
    from sagemeter.options.slo import SloOptions


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
        target=http_root, price_per_hour=price_per_hour, **options.load_fields()
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
        if search is None:
            return SloFigures(slo_note="no operating point: the search kept no record")
        # A search the client could not finish found nothing either way: not a finding.
        lead = "no operating point" if search.client_limited else "no load met the SLO"
        return SloFigures(slo_note=f"{lead}: {search.reason}", slo_search=record)
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
