"""`load --sessions N --turns K --think-time DIST`: multi-turn conversations, closed loop per
session.

N session slots run at once; each runs a session of K turns, then (while `--duration` lasts)
begins another. Every turn sends the conversation so far (chat messages: each earlier prompt and
the reply the server gave to it, then the prompt again), so a later turn's prompt is longer and
a server's prefix cache can serve its start. After a reply the session thinks for a time drawn
from DIST (`fixed:2s`, `uniform:1s,3s`) and then sends its next turn; that instant is the turn's
scheduled send, so the client's lateness is checked against it as open-loop arrivals are
(`send_lag_s`, late against schedule), never counted as the client's closed-loop gap. A failed
turn ends its session (there is no reply to carry on). Every session begun runs all its turns.

The turns run on one event loop in this process: sessions that think between turns are a light
load, and the run's loop lag and CPU share are judged as every run's are.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from sagemeter.calibrate.timing import parse_duration
from sagemeter.errors import SettingsError, UserError
from sagemeter.evidence.distribution import Distribution, distribution
from sagemeter.loadgen.build import build_result
from sagemeter.loadgen.result import LoadResult
from sagemeter.loadgen.settings import LoadSettings, available_cores
from sagemeter.request_record import RequestRecord
from sagemeter.signal_wakeup import woken_by_signals
from sagemeter.transport.address import parse_address
from sagemeter.transport.client import HttpClient
from sagemeter.transport.clock import LagSampler, sleep_until
from sagemeter.transport.pool import RunOutput, WorkerSummary
from sagemeter.transport.request import discover_model, request_body, request_bytes
from sagemeter.transport.worker import new_loop

if TYPE_CHECKING:
    from rich.table import Table

_THINK = re.compile(r"^(fixed|uniform):(.+)$")


@dataclass(frozen=True)
class ThinkTime:
    """Seconds a session waits between a reply and its next turn: fixed, or uniform in a range."""

    text: str
    low_s: float
    high_s: float

    def draw(self, rng: random.Random) -> float:
        return self.low_s if self.low_s == self.high_s else rng.uniform(self.low_s, self.high_s)


def parse_think_time(text: str) -> ThinkTime:
    """`fixed:2s` or `uniform:1s,3s` (any duration `--duration` takes), else one UserError."""
    match = _THINK.match(text.strip())
    hint = "give fixed:2s or uniform:1s,3s"
    if match is None:
        raise UserError(f"--think-time {text!r}: {hint}")
    kind, rest = match.groups()
    parts = [part.strip() for part in rest.split(",")]
    if len(parts) != (1 if kind == "fixed" else 2):
        raise UserError(f"--think-time {text!r}: {hint}")
    seconds = [parse_duration(part, "--think-time") for part in parts]
    if any(not math.isfinite(s) or s < 0 for s in seconds):
        raise UserError(f"--think-time {text!r}: times must be zero or more")
    low, high = seconds[0], seconds[-1]
    if high < low:
        raise UserError(f"--think-time {text!r}: the range's low end comes first")
    return ThinkTime(text=text.strip(), low_s=low, high_s=high)


@dataclass(frozen=True)
class SessionPlan:
    """How many sessions at once, of how many turns, thinking how long; their bounds are
    `--sessions` and `--turns`' own (`sagemeter.options.load`)."""

    sessions: int
    turns: int
    think: ThinkTime


def check_session_settings(settings: LoadSettings) -> None:
    """Sessions are their own closed loop on the chat API: the other load shapes are refused."""
    clashes = {
        "{rate}": settings.rate is not None,
        "{sweep}": settings.sweep,
        "{search}": settings.search is not None,
        "{shard}": settings.sharded or settings.start_at is not None,
    }
    for name, given in clashes.items():
        if given:
            raise SettingsError(f"{{sessions}} runs conversations; leave out {name}")
    if settings.api != "chat":
        raise SettingsError("{sessions} carries a conversation in chat messages: use {api} chat")


class TurnFigures(BaseModel):
    """One turn number over every session: requests, failures, TTFT, the server's prompt count."""

    turn: int = Field(description="1 is a session's first turn")
    requests: int
    failed: int
    ttft_s: Distribution
    prompt_tokens_median: float | None = Field(
        description="usage.prompt_tokens, median; None when the server gave none"
    )


class SessionFigures(BaseModel):
    """What sessions add to a load result: TTFT by turn, first turn against the later ones."""

    sessions: int = Field(description="session slots at once (--sessions)")
    turns: int
    think_time: str
    sessions_started: int
    sessions_completed: int = Field(description="sessions whose every turn was answered")
    ttft_first_turn_s: Distribution
    ttft_later_turns_s: Distribution
    by_turn: list[TurnFigures]
    rule: str = (
        "every answered turn of every session (not only the steady window): "
        "TTFT = first content event − send"
    )


class SessionLoadResult(LoadResult):
    """A load result with the sessions' figures (a `sagemeter.load/1` file with `sessions`)."""

    sessions: SessionFigures


def _ttft(record: RequestRecord) -> float:
    return (record.arrivals_us[0] - record.send_us) * 1e-6


def session_figures(
    plan: SessionPlan, records: list[RequestRecord], started: int
) -> SessionFigures:
    """TTFT per turn (record `index` is the turn, from 0; `stream` is the session)."""
    by_session: dict[int, list[RequestRecord]] = {}
    for record in records:
        by_session.setdefault(record.stream, []).append(record)
    completed = sum(
        1 for turns in by_session.values() if len(turns) == plan.turns and all(r.ok for r in turns)
    )
    by_turn = []
    for turn in range(plan.turns):
        these = [r for r in records if r.index == turn]
        answered = [r for r in these if r.ok]
        prompts = sorted(r.prompt_tokens for r in answered if r.prompt_tokens is not None)
        by_turn.append(
            TurnFigures(
                turn=turn + 1,
                requests=len(these),
                failed=len(these) - len(answered),
                ttft_s=distribution(_ttft(r) for r in answered),
                prompt_tokens_median=distribution(prompts).median if prompts else None,
            )
        )
    ok = [r for r in records if r.ok]
    return SessionFigures(
        sessions=plan.sessions,
        turns=plan.turns,
        think_time=plan.think.text,
        sessions_started=started,
        sessions_completed=completed,
        ttft_first_turn_s=distribution(_ttft(r) for r in ok if r.index == 0),
        ttft_later_turns_s=distribution(_ttft(r) for r in ok if r.index > 0),
        by_turn=by_turn,
    )


@dataclass
class _Conversations:
    """The run's shared state: records so far and sessions begun."""

    records: list[RequestRecord]
    started: int = 0


async def _converse(
    settings: LoadSettings,
    plan: SessionPlan,
    client: HttpClient,
    model: str,
    api_key: str | None,
) -> tuple[_Conversations, list[float]]:
    address = parse_address(settings.target)
    state = _Conversations(records=[])
    numbers = itertools.count()
    rng = random.Random(settings.seed)
    stop_at = client.origin + settings.duration_s
    sampler = LagSampler(asyncio.get_running_loop())
    sampler.start()

    async def slot() -> None:
        while time.perf_counter() < stop_at:
            session = next(numbers)
            state.started += 1
            messages: list[dict[str, str]] = []
            due = time.perf_counter()
            for turn in range(plan.turns):
                messages.append({"role": "user", "content": settings.prompt})
                body = request_body("chat", model, settings.prompt, settings.max_tokens)
                body["messages"] = list(messages)
                payload = request_bytes(address, "chat", body, api_key)
                await sleep_until(due)
                live = await client.exchange(
                    payload, max_tokens=settings.max_tokens, keep_text=True
                )
                live.stream, live.index, live.scheduled = session, turn, due
                record = client.freeze(live)
                state.records.append(record)
                if not record.ok:
                    break
                messages.append({"role": "assistant", "content": record.text or ""})
                due = live.end + plan.think.draw(rng)

    try:
        await asyncio.gather(*(slot() for _ in range(plan.sessions)))
    finally:
        sampler.stop()
        await client.aclose()
    return state, list(sampler.samples)


class _ScheduledSends(LoadSettings):
    """The settings as the figures are judged: each turn has a scheduled send (the reply before
    it plus the think time), so the window and the send lag follow the scheduled-arrival rules
    (the result itself says `mode: closed`, which sessions are)."""

    @property
    def mode(self) -> Literal["closed", "poisson"]:
        return "poisson"


def run_sessions(
    settings: LoadSettings, plan: SessionPlan, started: float, api_key: str | None = None
) -> SessionLoadResult:
    """Run the sessions against `settings.target`; `started` is the command's perf_counter."""
    settings = settings.model_copy(update={"concurrency": plan.sessions}).checked()
    check_session_settings(settings)
    endpoint = parse_address(settings.target)
    model = settings.model or discover_model(endpoint, api_key)
    settings = settings.model_copy(update={"model": model})
    client = HttpClient(settings.target, api_key=api_key, timeout_s=settings.timeout_s)
    loop_name, loop = new_loop(settings.prefer_uvloop)
    cpu_before = time.process_time()
    try:
        with woken_by_signals(loop):
            state, lags = loop.run_until_complete(_converse(settings, plan, client, model, api_key))
    finally:
        loop.close()
    run_s = time.perf_counter() - client.origin
    cpu_s = time.process_time() - cpu_before
    run = RunOutput(
        wall_start=client.origin_wall,
        startup_s=0.0,
        records=sorted(state.records, key=lambda r: (r.send_us, r.stream, r.index)),
        loop_lag_us=[round(lag * 1e6) for lag in lags],
        workers=[
            WorkerSummary(
                worker=0,
                loop=loop_name,
                requests=len(state.records),
                run_s=run_s,
                cpu_run_s=cpu_s,
                cpu_total_s=cpu_s,
                start_late_s=0.0,
            )
        ],
        cores=available_cores(),
    )
    judged = _ScheduledSends(**settings.model_dump())
    result = build_result(
        judged,
        run,
        asked_concurrency=plan.sessions,
        wall_s=time.perf_counter() - started,
        include_raw=settings.raw,
    )
    figures = session_figures(plan, run.records, state.started)
    return SessionLoadResult(
        **{**result.model_dump(), "mode": "closed", "settings": settings.model_dump()},
        sessions=figures,
    )


def turn_table(figures: SessionFigures) -> Table:
    """TTFT by turn, first against later, in milliseconds (the terminal's view)."""
    from rich.table import Table

    table = Table(
        title=f"sessions: {figures.sessions} at once, {figures.turns} turns, think "
        f"{figures.think_time}; {figures.sessions_completed} of {figures.sessions_started} "
        "sessions answered every turn"
    )
    for column in ("turn", "requests", "failed", "TTFT p50 ms", "TTFT p99 ms", "prompt tokens"):
        table.add_column(column, justify="left" if column == "turn" else "right")

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1e3:.2f}"

    for turn in figures.by_turn:
        prompt = turn.prompt_tokens_median
        table.add_row(
            str(turn.turn),
            str(turn.requests),
            str(turn.failed),
            ms(turn.ttft_s.median),
            ms(turn.ttft_s.p99),
            "-" if prompt is None else f"{prompt:g}",
        )
    for name, dist in (
        ("first", figures.ttft_first_turn_s),
        ("later", figures.ttft_later_turns_s),
    ):
        table.add_row(name, str(dist.n), "", ms(dist.median), ms(dist.p99), "")
    return table
