"""Every knob of a load run, checked once, so a bad value is one clear line before any work."""

from __future__ import annotations

import math
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict

from sagemeter.errors import UserError
from sagemeter.limits import (
    MAX_RATE,
    MAX_STREAMS,
    MAX_WAIT_S,
    Seconds,
    Seed,
    Tokens,
    Workers,
    check_price,
    checked,
)
from sagemeter.loadgen.lengths import parse_lengths
from sagemeter.loadgen.trace import read_trace_cached
from sagemeter.prompt_tokenizer import check_tokenizer_path, tokenizer_at
from sagemeter.transport.pool import available_cores
from sagemeter.transport.request import DEFAULT_PROMPT

__all__ = ["MAX_CONCURRENCY", "LoadSettings", "available_cores"]

MAX_CONCURRENCY = MAX_STREAMS  # streams at once from one machine (sharded runs: each shard's part)
# The percentiles an SLO search can hold to: those every result's distributions carry.
SLO_PERCENTILES = (50.0, 90.0, 99.0)


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
        """Self, or a UserError naming the first bad value."""
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise UserError(
                f"--concurrency {self.concurrency}: give 1 to {MAX_CONCURRENCY} streams at once"
            )
        checked(self.max_tokens, Tokens, "--max-tokens")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise UserError(f"--duration {self.duration_s!r}: give a positive number of seconds")
        checked(self.duration_s, Seconds, "--duration")
        if self.rate is not None and not (math.isfinite(self.rate) and 0 < self.rate <= MAX_RATE):
            raise UserError(
                f"--rate {self.rate!r}: give a positive number of requests per second, at most "
                f"{MAX_RATE:,.0f}"
            )
        checked(self.seed, Seed, "--seed")
        if self.rate is not None and self.sweep:
            raise UserError("--sweep raises --concurrency step by step; it cannot go with --rate")
        if self.sweep and self.sharded:
            raise UserError("--sweep runs on one machine; leave out --shard")
        if self.workers is not None:
            checked(self.workers, Workers, "--workers")
        checked(self.timeout_s, Seconds, "--timeout")
        for flag, value in (("--slo-ttft", self.slo_ttft_s), ("--slo-tpot", self.slo_tpot_s)):
            if value is not None and not value > 0:
                raise UserError(f"{flag} {value!r}: give a positive duration, e.g. 200ms")
            if value is not None:
                checked(value, Seconds, flag)
        self._check_workload()
        self._check_search()
        if self.start_at is not None:
            check_start_at(self.start_at, time.time())
        if not 0 <= self.shard_index < self.shard_count:
            raise UserError(
                f"--shard {self.shard_index}/{self.shard_count}: give i/n with 0 ≤ i < n"
            )
        if self.mode == "closed" and self.concurrency < self.shard_count:
            raise UserError(
                f"--concurrency {self.concurrency} cannot be split into {self.shard_count} shards"
            )
        return self

    def _check_workload(self) -> None:
        for flag, spec in (
            ("--input-tokens", self.input_tokens),
            ("--output-tokens", self.output_tokens),
        ):
            if spec is not None:
                parse_lengths(spec, flag)
        drawn = self.input_tokens is not None or self.output_tokens is not None
        if self.tokenizer is not None:
            self._check_tokenizer()
        if (drawn or self.trace is not None) and self.sharded:
            raise UserError(
                "--trace, --input-tokens and --output-tokens run on one machine (a shard merge "
                "would lose the workload's record); leave out --shard"
            )
        burst = self.burstiness
        if not (math.isfinite(burst) and 0 < burst <= 1000):
            raise UserError(
                f"--burstiness {burst!r}: give a positive number up to 1000 (1 is Poisson)"
            )
        if burst != 1.0 and self.rate is None:
            raise UserError("--burstiness shapes the arrivals of --rate: give --rate too")
        if self.trace is None:
            if self.trace_speed != 1.0:
                raise UserError("--trace-speed scales a --trace's times: give --trace too")
            return
        speed = self.trace_speed
        if not (math.isfinite(speed) and 0 < speed <= 1_000_000):
            raise UserError(
                f"--trace-speed {speed!r}: give a positive factor up to 1,000,000 "
                "(2 is twice as fast)"
            )
        for flag, given in (
            ("--rate", self.rate is not None),
            ("--sweep", self.sweep),
            ("--search", self.search is not None),
            ("--input-tokens", self.input_tokens is not None),
            ("--output-tokens", self.output_tokens is not None),
        ):
            if given:
                raise UserError(
                    f"--trace sends its own requests at its own times and lengths; leave out {flag}"
                )
        from pathlib import Path

        read_trace_cached(Path(self.trace))

    def _check_tokenizer(self) -> None:
        """A local GGUF or tokenizer folder, read now (one line when it is not one), and only
        where prompts are sized; a Hub name is refused: sagemeter never downloads one."""
        from pathlib import Path

        assert self.tokenizer is not None
        if self.trace is None and self.input_tokens is None:
            raise UserError("--tokenizer cuts the prompts of --trace or --input-tokens; give one")
        if not Path(self.tokenizer).exists():
            raise UserError(
                f"--tokenizer {self.tokenizer}: no such file or folder here; give a local .gguf "
                "or a folder holding tokenizer.json (sagemeter never downloads a tokenizer)"
            )
        tokenizer_at(str(check_tokenizer_path(Path(self.tokenizer))))

    def _check_search(self) -> None:
        if self.slo_percentile not in SLO_PERCENTILES:
            raise UserError(
                f"--slo-percentile {self.slo_percentile:g}: give 50, 90 or 99 (the percentiles "
                "a load result carries)"
            )

        check_price(self.price_per_hour)  # every command's price, one rule
        if self.search is None:
            return
        if self.slo_ttft_s is None and self.slo_tpot_s is None:
            raise UserError(
                f"--search {self.search} looks for the largest load that meets the SLO: give "
                "--slo-ttft, --slo-tpot or both"
            )
        if self.sweep:
            raise UserError("--search and --sweep both choose the levels; give one of them")
        if self.sharded or self.start_at is not None:
            raise UserError("--search runs its probes on one machine; leave out --shard/--start-at")
        if self.search == "rate" and self.rate is None:
            raise UserError("--search rate starts at --rate: give the first rate to try, e.g. 2")
        if self.search == "concurrency" and self.rate is not None:
            raise UserError(
                "--search concurrency raises streams at once up to --concurrency; leave out "
                "--rate (or search the rate with --search rate)"
            )

    def worker_count(self) -> int:
        return self.workers if self.workers is not None else available_cores()


START_AT_MAX_AHEAD_S = MAX_WAIT_S  # --start-at lines shards up within minutes, never days


def check_start_at(start_at: float, now: float) -> None:
    """A common start instant: a finite Unix time, not past, at most a day ahead (a mistyped
    time would wait for ever)."""
    if not math.isfinite(start_at):
        raise UserError(f"--start-at {start_at!r}: give a Unix time in seconds")
    if start_at < now:
        raise UserError(f"--start-at {start_at:.3f} is in the past")
    if start_at > now + START_AT_MAX_AHEAD_S:
        ahead_h = (start_at - now) / 3600
        raise UserError(
            f"--start-at {start_at:.3f} is {ahead_h:,.0f} h from now; "
            "give a start within a day (a mistyped time would wait for ever)"
        )
