"""`/metrics` around each phase of a measurement: a snapshot before, a settled one after.

A server without `/metrics` (or one that is neither vLLM nor llama.cpp) is not an error: the
recorder says why in a note and measures nothing, so the measurement itself is never lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sagemeter.errors import UserError
from sagemeter.evidence.distribution import spread
from sagemeter.measure.server_metrics.crosscheck import NAMES, client_counts, compare_phase
from sagemeter.measure.server_metrics.scrape import Snapshot, scrape
from sagemeter.request_record import RequestRecord
from sagemeter.results import DecodeDetail, PrefillDetail, StartupFacts
from sagemeter.results.server_metrics import ServerMetrics
from sagemeter.transport.client import HttpClient

SETTLE_PAUSE_S = 0.2
SETTLE_READS = 15  # at most 3 s for the counters to stop moving


class MetricsRecorder:
    """Reads `/metrics` of the server at `root` (`http://host:port`) around named phases."""

    def __init__(self, root: str | None) -> None:
        self.root = root
        self.http = HttpClient(root) if root else None
        self.engine: str | None = None
        self.detail: ServerMetrics | None = None
        self.note: str | None = None if root else "no HTTP API of the server's own"
        self.first: Snapshot | None = None
        self._before: Snapshot | None = None

    async def open(self) -> None:
        """Read once: which engine, and whether there are metrics at all."""
        url = f"{self.root}/metrics" if self.root else None
        if self.http is None:
            self.detail = ServerMetrics(url=url, notes=[f"server metrics not read: {self.note}"])
            return
        try:
            snapshot = await scrape(self.http)
        except UserError as exc:
            self.note = f"server metrics not read: {exc}"
        else:
            self.engine = snapshot.engine
            if self.engine is None:
                self.note = "server metrics not read: /metrics names neither vLLM's nor llama.cpp's"
        if self.engine is None:
            self.detail = ServerMetrics(url=url, notes=[str(self.note)])
            await self.close()
            return
        self.first = snapshot
        self.detail = ServerMetrics(engine=self.engine, url=url)

    async def close(self) -> None:
        if self.http is not None:
            await self.http.aclose()
            self.http = None

    async def begin(self) -> None:
        """The snapshot before a phase."""
        self._before = await self._read()

    async def end(
        self,
        phase: str,
        records: Sequence[RequestRecord],
        requests: int | None = None,
        *,
        unrecorded: tuple[int, int] = (0, 0),
    ) -> None:
        """The settled snapshot after a phase, compared with the client's `records`.

        `unrecorded` is (requests, tokens) the phase sent but kept no record of (decode's
        warm-up, counted at the length it asked with ignore_eos).
        """
        before, self._before = self._before, None
        if before is None or self.engine is None or self.detail is None:
            return
        after = await self._settled()
        if after is None:
            return
        self.detail.phases.append(
            compare_phase(
                phase, self.engine, before, after, client_counts(records, requests, unrecorded)
            )
        )

    async def _read(self) -> Snapshot | None:
        if self.http is None:
            return None
        try:
            return await scrape(self.http)
        except UserError as exc:
            if self.detail is not None:
                self.detail.notes.append(str(exc))
            return None

    async def _settled(self) -> Snapshot | None:
        """Read until the generation and request counters stop moving between two reads."""
        assert self.engine is not None
        names = NAMES[self.engine]
        keys = [names.generation_tokens, names.requests]
        previous = await self._read()
        for _ in range(SETTLE_READS):
            await asyncio.sleep(SETTLE_PAUSE_S)
            current = await self._read()
            if previous is None or current is None:
                return current
            if all(previous.samples.get(k) == current.samples.get(k) for k in keys if k):
                return current
            previous = current
        return previous

    def startup_facts(self) -> StartupFacts | None:
        """vLLM states its KV cache and concurrency in `vllm:cache_config_info`'s labels."""
        labels = self.first.labels.get("vllm:cache_config_info") if self.first else None
        if not labels:
            return None

        def number(key: str) -> float | None:
            try:
                return float(labels[key])
            except (KeyError, ValueError):
                return None

        tokens, concurrency = number("kv_cache_size_tokens"), number("kv_cache_max_concurrency")
        if tokens is None and concurrency is None:
            return None
        keys = ("kv_cache_size_tokens", "kv_cache_max_concurrency")
        return StartupFacts(
            source=f"vllm /metrics ({self.root}/metrics, cache_config_info)",
            kv_cache_tokens=int(tokens) if tokens is not None else None,
            max_concurrency=concurrency,
            lines=[f"{key}={labels[key]}" for key in keys if key in labels],
            startups_in_log=None,
        )

    def warnings(self) -> list[str]:
        """Every disagreement beyond counting noise, one line each."""
        if self.detail is None:
            return []
        return [
            problem
            for phase in self.detail.phases
            for problem in phase.problems
            if "beyond" in problem or "finished" in problem
        ]


def use_engine_rate_from_metrics(decode: DecodeDetail, detail: ServerMetrics | None) -> None:
    """vLLM's own decode rate, where the replies carried none (llama.cpp's `timings` do): the
    decode phase's rate from `/metrics`, one figure over the phase (n = 1)."""
    if decode.engine_tokens_per_second is not None or detail is None:
        return
    phase = next((p for p in detail.phases if p.phase == "decode"), None)
    if phase is not None and phase.engine_tokens_per_second is not None:
        decode.engine_tokens_per_second = spread([phase.engine_tokens_per_second])


def use_engine_prompt_rate_from_metrics(
    prefill: PrefillDetail | None, detail: ServerMetrics | None
) -> None:
    """vLLM's own prompt rate, where the replies carried none (llama.cpp's `timings` do): the
    prefill phase's rate from `/metrics`, one figure over the phase (n = 1)."""
    if prefill is None or prefill.engine_tokens_per_second is not None or detail is None:
        return
    phase = next((p for p in detail.phases if p.phase == "prefill"), None)
    if phase is not None and phase.engine_prompt_tokens_per_second is not None:
        prefill.engine_tokens_per_second = spread([phase.engine_prompt_tokens_per_second])
