"""A load run's workload beyond one fixed request: a replayed trace, or drawn lengths.

Built in the parent before the sending starts, after the model is known:
- a trace: one payload per scheduled request, its prompt made of its blocks' words (a block id's
  words are the same in every request, so shared ids are shared prefixes), its length the
  trace's input length as the server counts it, `max_tokens` its output length;
- drawn lengths: a deck of payloads (prompt and reply lengths drawn from the distributions,
  seeded) cycled by the workers, each send's prompt stamped with a nonce of its own
  (transport/deck.py) so no prefix cache serves it.
Prompt lengths come from the server's own count (`prompt_text.Sizing`, two probes' usage), or,
with `--tokenizer`, from the model's own tokenizer (`prompt_text.ExactSizing`: the text cut
exactly, the chat template's overhead still the server's); a server that does not count prompts
cannot be given a length, which is said, never guessed.
After the run, `measured` sets the server's counts beside what was asked.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from sagemeter import signal_wakeup
from sagemeter.errors import UserError
from sagemeter.evidence.distribution import Distribution, distribution
from sagemeter.loadgen.lengths import parse_lengths
from sagemeter.loadgen.prompt_text import (
    PROBE_WORDS,
    ExactSizing,
    Sizing,
    block_prompt,
    fit_sizing,
    own_prompt,
    words,
)
from sagemeter.loadgen.result import LengthSizing, Workload
from sagemeter.loadgen.schedule import gamma_schedule, trace_schedule
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.loadgen.trace import BLOCK_TOKENS, read_trace_cached
from sagemeter.prompt_tokenizer import tokenizer_at
from sagemeter.request_record import RequestRecord
from sagemeter.transport.address import ServerAddress
from sagemeter.transport.client import HttpClient
from sagemeter.transport.deck import RUN_WORDS, Deck, nonce_text
from sagemeter.transport.request import request_body, request_bytes

DECK_CLOSED = 1024  # drawn shapes a closed loop cycles through
DECK_OPEN_MAX = 2048  # an open loop draws one per arrival, up to this many
Build = Callable[[str, int], bytes]  # (prompt, max_tokens) → the request's bytes
SIZING_METHOD = "calibrated: two probes' usage.prompt_tokens (the server's own count)"
EXACT_METHOD = (
    "exact: text cut by the tokenizer's own count; the chat template's overhead_tokens from two "
    "probes' usage.prompt_tokens less the tokenizer's count of their text"
)


def schedule(settings: LoadSettings) -> list[float]:
    """The open-loop send instants: a trace's (scaled, within --duration) or --rate's."""
    if settings.trace is not None:
        trace = read_trace_cached(Path(settings.trace))
        times = [request.at_s for request in trace.requests]
        return trace_schedule(times, settings.trace_speed, settings.duration_s)
    assert settings.rate is not None
    return gamma_schedule(settings.rate, settings.duration_s, settings.seed, settings.burstiness)


def uses_deck(settings: LoadSettings) -> bool:
    return any(
        x is not None for x in (settings.trace, settings.input_tokens, settings.output_tokens)
    )


@dataclass
class Prepared:
    """The deck the workers send, what it asked, and the record the result will carry."""

    deck: Deck
    asked_input: list[int] | None
    workload: Workload


# Sizings already probed in this process, by (target, api, model): an operating-point search runs
# many probes against one server. A later run checks the line with one probe of the first length
# (a different server on the same address and model name would count it otherwise) and probes
# afresh when the count moved.
_SIZINGS: dict[tuple[str, str, str], tuple[Sizing, list[tuple[int, int]]]] = {}
Sized = tuple[Sizing, list[tuple[int, int]]]
T = TypeVar("T")


def _blocking(coroutine: Coroutine[object, object, T]) -> T:
    """Run `coroutine` to its end from synchronous code, inside an event loop or not."""
    probe = partial(signal_wakeup.run, coroutine)
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: load, or a search in its own thread
        return probe()
    with ThreadPoolExecutor(1) as thread:  # inside a loop: a thread and a loop of its own
        return thread.submit(probe).result()


def sizing_for(
    settings: LoadSettings, endpoint: ServerAddress, model: str, api_key: str | None
) -> Sized:
    """The server's count of this text as a line, and the probes' (words, tokens)."""
    key = (settings.target, settings.api, model)
    cached = _SIZINGS.get(key)
    if cached is not None:
        first_words, first_tokens = cached[1][0]
        if _blocking(_counts(settings, endpoint, model, api_key, (first_words,)))[0][1] == (
            first_tokens
        ):
            return cached
    _SIZINGS[key] = _blocking(_probe_sizing(settings, endpoint, model, api_key))
    return _SIZINGS[key]


async def _counts(
    settings: LoadSettings,
    endpoint: ServerAddress,
    model: str,
    api_key: str | None,
    lengths: Sequence[int],
) -> list[tuple[int, int]]:
    """(words, usage.prompt_tokens) of one fresh prompt of each length, one reply token each."""
    texts = [_probe_text(count) for count in lengths]
    tokens = await _server_counts(settings, endpoint, model, api_key, texts)
    return list(zip(lengths, tokens, strict=True))


def _probe_text(count: int) -> str:
    """`count` words unlike any earlier prompt's from their first (a fresh nonce run)."""
    nonce = nonce_text(secrets.randbits(4 * RUN_WORDS))
    return " ".join([nonce, *words(secrets.token_hex(4), count - len(nonce.split()))])


async def _server_counts(
    settings: LoadSettings,
    endpoint: ServerAddress,
    model: str,
    api_key: str | None,
    texts: Sequence[str],
) -> list[int]:
    """usage.prompt_tokens of each text sent as a prompt, one reply token each."""
    client = HttpClient(settings.target, api_key=api_key, timeout_s=settings.timeout_s)
    counts: list[int] = []
    try:
        for text in texts:
            body = request_body(settings.api, model, text, 1)
            record = await client.exchange(
                request_bytes(endpoint, settings.api, body, api_key), max_tokens=1
            )
            if record.error is not None:
                raise UserError(f"sizing the prompts: a probe request failed: {record.error}")
            if record.prompt_tokens is None:
                raise UserError(
                    "sizing the prompts: the server reports no usage.prompt_tokens, so prompts "
                    "cannot be made a number of its tokens long (sagemeter does not guess a count)"
                )
            counts.append(record.prompt_tokens)
    finally:
        await client.aclose()
    return counts


async def _probe_sizing(
    settings: LoadSettings, endpoint: ServerAddress, model: str, api_key: str | None
) -> Sized:
    """Two prompts of known word counts: the line through the server's counts of them."""
    counts = await _counts(settings, endpoint, model, api_key, PROBE_WORDS)
    sizing = fit_sizing(counts)
    if sizing is None:
        raise UserError(
            f"sizing the prompts: the server counted {counts[0][1]} and {counts[1][1]} tokens "
            f"for {counts[0][0]} and {counts[1][0]} words"
        )
    return sizing, counts


def _exact_record(
    settings: LoadSettings, endpoint: ServerAddress, model: str, api_key: str | None
) -> tuple[ExactSizing, LengthSizing]:
    """The tokenizer's cut with the server's template overhead: two probes, whose overheads
    (server's count − tokenizer's) must agree, or the tokenizer is not the one the server counts
    with (one UserError: a prompt it sized would not be the length asked)."""
    assert settings.tokenizer is not None
    tokenizer = tokenizer_at(settings.tokenizer)
    texts = [_probe_text(count) for count in PROBE_WORDS]
    served = _blocking(_server_counts(settings, endpoint, model, api_key, texts))
    own = [tokenizer.count(text) for text in texts]
    overheads = [server - mine for server, mine in zip(served, own, strict=True)]
    if overheads[0] != overheads[1]:
        raise UserError(
            f"--tokenizer {settings.tokenizer}: it does not count as the server does (probes of "
            f"{own[0]} and {own[1]} tokens by it, {served[0]} and {served[1]} by the server); "
            "give the served model's tokenizer, or leave out --tokenizer to size by the server"
        )
    probes = list(zip(PROBE_WORDS, served, strict=True))
    record = LengthSizing(
        method=EXACT_METHOD,
        counter="tokenizer",
        tokenizer=tokenizer.source,
        tokens_per_word=(served[1] - served[0]) / (PROBE_WORDS[1] - PROBE_WORDS[0]),
        overhead_tokens=float(overheads[0]),
        probes=probes,
    )
    return ExactSizing(tokenizer, overheads[0]), record


def _dist(values: Sequence[float]) -> Distribution:
    return distribution(float(v) for v in values)


def prepare(
    settings: LoadSettings,
    endpoint: ServerAddress,
    model: str,
    api_key: str | None,
    arrivals: int,
) -> Prepared:
    """The deck and its record for `settings` (uses_deck must hold); `arrivals` is the open
    loop's scheduled count (0 for a closed loop)."""
    needs_sizing = settings.trace is not None or settings.input_tokens is not None
    sizing: Sizing | ExactSizing | None = None
    record_sizing: LengthSizing | None = None
    if needs_sizing and settings.tokenizer is not None:
        sizing, record_sizing = _exact_record(settings, endpoint, model, api_key)
    elif needs_sizing:
        line, probes = sizing_for(settings, endpoint, model, api_key)
        sizing = line
        record_sizing = LengthSizing(
            method=SIZING_METHOD,
            counter="server",
            tokens_per_word=line.per_word,
            overhead_tokens=line.overhead,
            probes=probes,
        )

    def payload(prompt: str, max_tokens: int) -> bytes:
        body = request_body(settings.api, model, prompt, max_tokens)
        return request_bytes(endpoint, settings.api, body, api_key)

    if settings.trace is not None:
        assert sizing is not None
        return _trace_deck(settings, sizing, record_sizing, arrivals, payload)
    return _drawn_deck(settings, sizing, record_sizing, arrivals, payload)


def _trace_deck(
    settings: LoadSettings,
    sizing: Sizing | ExactSizing,
    record_sizing: LengthSizing | None,
    arrivals: int,
    payload: Build,
) -> Prepared:
    """One payload per scheduled trace request, in the schedule's order."""
    assert settings.trace is not None
    trace = read_trace_cached(Path(settings.trace))
    sent = trace.requests[:arrivals]
    payloads = tuple(
        payload(
            block_prompt(
                sizing, r.hash_ids, r.input_tokens, BLOCK_TOKENS, settings.seed, own=str(i)
            ),
            r.output_tokens,
        )
        for i, r in enumerate(sent)
    )
    seen: set[int] = set()
    reuses = 0
    for request in sent:
        for block in request.hash_ids:
            reuses += block in seen
            seen.add(block)
    inputs = [r.input_tokens for r in sent]
    outputs = [r.output_tokens for r in sent]
    workload = Workload(
        kind="trace",
        seed=settings.seed,
        trace_file=trace.path,
        trace_sha256=trace.sha256,
        trace_requests=len(trace.requests),
        trace_span_s=trace.span_s,
        trace_speed=settings.trace_speed,
        requests_scheduled=len(sent),
        block_tokens=BLOCK_TOKENS,
        unique_blocks=len(seen),
        block_reuses=reuses,
        shapes=len(sent),
        sizing=record_sizing,
        asked_input_tokens=_dist(inputs),
        asked_output_tokens=_dist(outputs),
    )
    deck = Deck(payloads, tuple(outputs), (-1,) * len(payloads))
    return Prepared(deck, inputs, workload)


def _drawn_deck(
    settings: LoadSettings,
    sizing: Sizing | ExactSizing | None,
    record_sizing: LengthSizing | None,
    arrivals: int,
    payload: Build,
) -> Prepared:
    """A deck of drawn (prompt, reply) lengths: one per arrival up to DECK_OPEN_MAX, or
    DECK_CLOSED for a closed loop."""
    count = min(arrivals, DECK_OPEN_MAX) if arrivals else DECK_CLOSED
    seed = settings.seed
    outputs = (
        parse_lengths(settings.output_tokens, "--output-tokens").sample(count, f"{seed}:output")
        if settings.output_tokens is not None
        else [settings.max_tokens] * count
    )
    inputs: list[int] | None = None
    run = secrets.randbits(4 * RUN_WORDS)  # a fresh nonce run: no earlier run's prompts meet these
    nonce = nonce_text(run)
    payloads: list[bytes] = []
    nonce_at: list[int] = []
    if settings.input_tokens is not None:
        assert sizing is not None
        inputs = parse_lengths(settings.input_tokens, "--input-tokens").sample(
            count, f"{seed}:input"
        )
        for k, (tokens, reply) in enumerate(zip(inputs, outputs, strict=True)):
            built = payload(own_prompt(sizing, tokens, nonce, f"{seed}:words:{k}"), reply)
            payloads.append(built)
            nonce_at.append(built.find(nonce.encode()))
    else:
        payloads = [payload(settings.prompt, reply) for reply in outputs]
        nonce_at = [-1] * count
    workload = Workload(
        kind="synthetic",
        seed=seed,
        input_tokens=settings.input_tokens,
        output_tokens=settings.output_tokens,
        burstiness=settings.burstiness if settings.rate is not None else None,
        requests_scheduled=arrivals or None,
        shapes=count,
        sizing=record_sizing,
        asked_input_tokens=None if inputs is None else _dist(inputs),
        asked_output_tokens=_dist(outputs),
    )
    return Prepared(Deck(tuple(payloads), tuple(outputs), tuple(nonce_at)), inputs, workload)


def measured(
    prepared: Prepared,
    records: Sequence[RequestRecord],
    open_loop: bool,
    lateness: Distribution | None,
) -> Workload:
    """The record with the server's counts of the prompts sent, beside the lengths asked."""
    answered = [r for r in records if r.ok and r.prompt_tokens is not None]
    counted = [r.prompt_tokens or 0 for r in answered]
    off: Distribution | None = None
    asked = prepared.asked_input
    if open_loop and asked:
        off = _dist([abs((r.prompt_tokens or 0) - asked[r.index % len(asked)]) for r in answered])
    cached = [r.cached_prompt_tokens for r in records if r.cached_prompt_tokens is not None]
    return prepared.workload.model_copy(
        update={
            "counted_input_tokens": _dist(counted) if counted else None,
            "input_off_by_tokens": off,
            "cached_input_tokens": sum(cached) if cached else None,
            "schedule_lateness_s": lateness if open_loop else None,
        }
    )
