"""Whether the server says it cached a prefix: vLLM's prefix-cache counters around the cache pair.

The pair's TTFT speed-up is the client's view; vLLM (v1) also counts, in prompt tokens, what its
prefix cache was asked for (`vllm:prefix_cache_queries`) and what it served
(`vllm:prefix_cache_hits`). Read just before the first send and after the second has settled,
their change says whether the server itself reports prefix caching. A server without those
counters (llama.cpp, SGLang, older vLLM, a SageMaker endpoint) gets a note saying so, never a
guessed answer. The counters are the whole server's: anything else it served during the pair is
in them too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sagemeter.errors import UserError
from sagemeter.measure.server_metrics.scrape import Snapshot, scrape
from sagemeter.transport.client import HttpClient

# prometheus_client writes a counter `name` as the sample `name_total`; both spellings are read.
QUERIES = "vllm:prefix_cache_queries"
HITS = "vllm:prefix_cache_hits"
SETTLE_PAUSE_S = 0.1
SETTLE_READS = 10


@dataclass(frozen=True)
class CacheCounts:
    """The two counters at one moment, in prompt tokens."""

    queries: float
    hits: float


def cache_counts(snapshot: Snapshot) -> CacheCounts | None:
    """vLLM's prefix-cache counters from one /metrics read; None when the page has neither."""

    def sample(name: str) -> float | None:
        for key in (f"{name}_total", name):
            if key in snapshot.samples:
                return snapshot.samples[key]
        return None

    queries, hits = sample(QUERIES), sample(HITS)
    if queries is None or hits is None:
        return None
    return CacheCounts(queries=queries, hits=hits)


@dataclass
class CacheReport:
    """What the counters said about the pair: their change, or why there is none."""

    queries: int | None = None
    hits: int | None = None
    reports_caching: bool | None = None
    note: str = ""


class PrefixCacheCounters:
    """Reads the counters of the server at `root` (`http://host:port`; None: it has no HTTP API
    of its own, as a SageMaker endpoint)."""

    def __init__(self, root: str | None) -> None:
        self.root = root
        self._before: CacheCounts | None = None
        self._why = "" if root else "the endpoint has no /metrics of its own"

    async def _read(self) -> CacheCounts | None:
        if self.root is None:
            return None
        http = HttpClient(self.root)
        try:
            counts = cache_counts(await scrape(http))
        except UserError as exc:
            self._why = f"/metrics not read: {exc}"
            return None
        finally:
            await http.aclose()
        if counts is None:
            self._why = f"the server's /metrics has no prefix-cache counters ({QUERIES}, {HITS})"
        return counts

    async def before(self) -> None:
        """Just before the pair's first send."""
        self._before = await self._read()

    async def after(self) -> CacheReport:
        """After the pair's second reply: the counters' change once they stop moving."""
        if self._before is None:
            return CacheReport(note=f"not known whether the server caches prefixes: {self._why}")
        previous = await self._read()
        for _ in range(SETTLE_READS):
            await asyncio.sleep(SETTLE_PAUSE_S)
            current = await self._read()
            if current is None or current == previous:
                break
            previous = current
        if previous is None:
            return CacheReport(note=f"not known whether the server caches prefixes: {self._why}")
        queries = round(previous.queries - self._before.queries)
        hits = round(previous.hits - self._before.hits)
        if queries < 0 or hits < 0:
            return CacheReport(
                note="not known whether the server caches prefixes: its prefix-cache counters "
                "went backwards during the pair (a restart?)"
            )
        said = "reports" if hits > 0 else "reports no"
        return CacheReport(
            queries=queries,
            hits=hits,
            reports_caching=hits > 0,
            note=(
                f"the server {said} prefix caching: {hits} of {queries} prompt tokens looked up "
                f"in its prefix cache during the pair were hits ({HITS}, {QUERIES})"
            ),
        )
