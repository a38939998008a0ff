"""Every knob of a load run. Each value's bounds are its option's (`sagemeter.options.load`),
checked by the face that took it; `LoadSettings.checked` weighs the settings together, so a bad
combination is one clear line, in that face's words, before any work."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict

from sagemeter.bounds import MAX_STREAMS, MAX_WAIT_S
from sagemeter.errors import SettingsError
from sagemeter.loadgen.trace import read_trace_cached
from sagemeter.prompt_tokenizer import check_tokenizer_path, tokenizer_at
from sagemeter.transport.pool import available_cores
from sagemeter.transport.request import DEFAULT_PROMPT

__all__ = ["MAX_CONCURRENCY", "LoadSettings", "available_cores"]

MAX_CONCURRENCY = MAX_STREAMS  # streams at once from one machine (sharded runs: each shard's part)


class LoadSettings(BaseModel):
    """What was asked. `concurrency` and `rate` are the whole run's, across every shard."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    api: Literal["chat", "completions"] = "chat"
    model: str | None = None
    prompt: str = DEFAULT_PROMPT
    max_tokens: int = 256
    concurrency: int = 16
    rate: float | None = None
    duration_s: float = 10.0
    seed: int = 0
    workers: int | None = None
    sweep: bool = False
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    # The operating-point search (loadgen/operating_point.py): what it raises, the percentile
    # every SLO holds at, and the price of an hour of the endpoint for $/M tokens.
    search: Literal["concurrency", "rate"] | None = None
    slo_percentile: float = 99.0
    price_per_hour: float | None = None
    # Workloads (loadgen/workload.py): a Mooncake trace replayed at its times (×1/trace_speed),
    # or drawn prompt and reply lengths; gamma arrivals of this burstiness for --rate.
    trace: str | None = None
    trace_speed: float = 1.0
    input_tokens: str | None = None
    output_tokens: str | None = None
    burstiness: float = 1.0
    # A local tokenizer (GGUF or Hugging Face folder) that cuts the prompts to exact lengths.
    tokenizer: str | None = None
    shard_index: int = 0
    shard_count: int = 1
    start_at: float | None = None
    timeout_s: float = 300.0
    raw: bool = False
    prefer_uvloop: bool = True

    @property
    def mode(self) -> Literal["closed", "poisson", "trace"]:
        """Closed loop, open loop at --rate (Poisson, or gamma with --burstiness), or a trace's
        own times (open loop too)."""
        if self.trace is not None:
            return "trace"
        return "poisson" if self.rate is not None else "closed"

    @property
    def sharded(self) -> bool:
        return self.shard_count > 1

    def checked(self) -> LoadSettings:
        """Self, or a SettingsError naming the first settings that do not go together.

        Each value's own bounds (1 to 4096 streams at once, a positive rate, …) are its
        option's, declared once in `sagemeter.options.load` (and `options.slo`) and checked by
        every face before settings are made; what is left here weighs settings against each
        other, against the clock or against the files they name. A message names each setting
        as `{field}`, so the face that took it spells it (`--rate`, `start_rate`, `slo.rate`).
        """
        if self.rate is not None and self.sweep:
            raise SettingsError(
                "{sweep} raises {concurrency} step by step; it cannot go with {rate}"
            )
        if self.sweep and self.sharded:
            raise SettingsError("{sweep} runs on one machine; leave out {shard}")
        self._check_workload()
        self._check_search()
        if self.start_at is not None:
            check_start_at(self.start_at, time.time())
        if not 0 <= self.shard_index < self.shard_count:
            raise SettingsError(
                f"{{shard}} {self.shard_index}/{self.shard_count}: give i/n with 0 ≤ i < n"
            )
        if self.mode == "closed" and self.concurrency < self.shard_count:
            raise SettingsError(
                f"{{concurrency}} {self.concurrency} cannot be split into {self.shard_count} shards"
            )
        return self

    def _check_workload(self) -> None:
        drawn = self.input_tokens is not None or self.output_tokens is not None
        if self.tokenizer is not None:
            self._check_tokenizer()
        if (drawn or self.trace is not None) and self.sharded:
            raise SettingsError(
                "{trace}, {input_tokens} and {output_tokens} run on one machine (a shard merge "
                "would lose the workload's record); leave out {shard}"
            )
        if self.burstiness != 1.0 and self.rate is None:
            raise SettingsError("{burstiness} shapes the arrivals of {rate}: give {rate} too")
        if self.trace is None:
            if self.trace_speed != 1.0:
                raise SettingsError("{trace_speed} scales a {trace}'s times: give {trace} too")
            return
        for name, given in (
            ("rate", self.rate is not None),
            ("sweep", self.sweep),
            ("search", self.search is not None),
            ("input_tokens", self.input_tokens is not None),
            ("output_tokens", self.output_tokens is not None),
        ):
            if given:
                raise SettingsError(
                    "{trace} sends its own requests at its own times and lengths; leave out "
                    f"{{{name}}}"
                )
        from pathlib import Path

        read_trace_cached(Path(self.trace))

    def _check_tokenizer(self) -> None:
        """A local GGUF or tokenizer folder, read now (one line when it is not one), and only
        where prompts are sized; a Hub name is refused: sagemeter never downloads one."""
        from pathlib import Path

        assert self.tokenizer is not None
        if self.trace is None and self.input_tokens is None:
            raise SettingsError(
                "{tokenizer} cuts the prompts of {trace} or {input_tokens}; give one"
            )
        if not Path(self.tokenizer).exists():
            raise SettingsError(
                f"{{tokenizer}} {self.tokenizer}: no such file or folder here; give a local "
                ".gguf or a folder holding tokenizer.json (sagemeter never downloads a tokenizer)"
            )
        tokenizer_at(str(check_tokenizer_path(Path(self.tokenizer))))

    def _check_search(self) -> None:
        if self.search is None:
            return
        if self.slo_ttft_s is None and self.slo_tpot_s is None:
            raise SettingsError(
                f"{{search}} {self.search} looks for the largest load that meets the SLO: give "
                "{slo_ttft_s}, {slo_tpot_s} or both"
            )
        if self.sweep:
            raise SettingsError("{search} and {sweep} both choose the levels; give one of them")
        if self.sharded or self.start_at is not None:
            raise SettingsError(
                "{search} runs its probes on one machine; leave out {shard}/{start_at}"
            )
        if self.search == "rate" and self.rate is None:
            raise SettingsError(
                "{search} rate starts at {rate}: give the first rate to try, e.g. 2"
            )
        if self.search == "concurrency" and self.rate is not None:
            raise SettingsError(
                "{search} concurrency raises streams at once up to {concurrency}; leave out "
                "{rate} (or search the rate with {search} rate)"
            )

    def worker_count(self) -> int:
        return self.workers if self.workers is not None else available_cores()


START_AT_MAX_AHEAD_S = MAX_WAIT_S  # --start-at lines shards up within minutes, never days


def check_start_at(start_at: float, now: float) -> None:
    """A common start instant: not past, at most a day ahead (a mistyped time would wait for
    ever); that it is a finite number is its option's bound."""
    if start_at < now:
        raise SettingsError(f"{{start_at}} {start_at:.3f} is in the past")
    if start_at > now + START_AT_MAX_AHEAD_S:
        ahead_h = (start_at - now) / 3600
        raise SettingsError(
            f"{{start_at}} {start_at:.3f} is {ahead_h:,.0f} h from now; "
            "give a start within a day (a mistyped time would wait for ever)"
        )
