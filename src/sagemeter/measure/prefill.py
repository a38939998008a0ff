"""Prefill rate the article's way, applied to the prompt: two prompt lengths, one token each.

rate = (long − short prompt tokens) / (median TTFT(long) − median TTFT(short)) cancels what every
first token pays besides the prompt (the network, the client, scheduling, the one decoded
token); the remainder at the short length is that per-call fixed cost.

Three rules keep the figure honest:
- Every prompt is unique from its first token (a nonce, then filler text), so no prefix cache
  (vLLM's blocks, llama.cpp's slot reuse) serves any part of it beyond the chat template.
- Prompt lengths are the server's own count (`usage.prompt_tokens`): the text is sized from two
  probes' counts, and each reply's own count goes into the figure. A server that gives no count
  is counted by the model's own tokenizer where sagemeter knows it (prompt_tokenizer.py:
  the checkpoint it started, or `--tokenizer`), else leaves no figure (never a guessed one),
  with the reason.
- Repeats alternate short and long (drift hits both alike); a reply far slower than the fastest
  of its length is set aside and asked again (measure/agreement.py), as decode does; so are
  short prompts no faster than the long ones' median, when the short median is not below it.

Then the prefix cache is measured on purpose: one fresh long prompt sent twice in a row.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sagemeter.errors import UserError
from sagemeter.evidence.bootstrap import interval
from sagemeter.evidence.distribution import spread
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.agreement import AGAIN_LIMIT, order_stayed, out_of_order, too_slow
from sagemeter.measure.figure_samples import prefill_samples
from sagemeter.measure.server_metrics.prefix_cache import PrefixCacheCounters
from sagemeter.measure.stats import CpuClock, client_share, median
from sagemeter.prompt_tokenizer import PromptTokenizer, load_tokenizer
from sagemeter.request_record import RequestRecord
from sagemeter.results import PrefillDetail, PrefixCacheCheck
from sagemeter.transport.chat import ChatClient, ChatRequest

# Common short words: most tokenizers make each one token (with its leading space).
FILLER_TEXT = (
    "the river ran past old stone walls where children played in the long evening light and "
    "their parents sat on wooden steps to talk about rain bread work and the small news of the "
    "town while a dog slept near the open door of a house that had stood there for many years"
)
FILLER = FILLER_TEXT.split(" ")
PROBE_WORDS = 32  # the small probe; the second probe is the short length
PROBES = 2
CACHE_PAIR = 2
# Room left below the server's context for the one reply token and the sizing's error.
CONTEXT_MARGIN_TOKENS = 16
CONTEXT_MARGIN_SHARE = 0.02
# The second send of the same prompt must be this much faster to say the cache served it.
CACHE_SPEEDUP = 1.5


def prefill_request_count(lengths: list[int], repeats: int) -> int:
    """Requests the phase sends (0 when it is off): probes, the points, the cache pair."""
    return PROBES + 2 * repeats + CACHE_PAIR if lengths else 0


def prompt_text(nonce: str, words: int) -> str:
    """`nonce` first, so the prompt differs from every other from its first token, then
    `words` words of filler."""
    body = (FILLER * (words // len(FILLER) + 1))[:words]
    return " ".join([nonce, *body])


class Nonces:
    """A new first word for every prompt: a per-run random part and a counter."""

    def __init__(self) -> None:
        self.run = secrets.token_hex(3)
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"q{self.run}n{self.count}"


@dataclass(frozen=True)
class Sizing:
    """The server's count as a line in filler words: tokens = overhead + per_word * words."""

    overhead: float
    per_word: float

    def words_for(self, tokens: int) -> int:
        return max(1, round((tokens - self.overhead) / self.per_word))


def clamp_to_context(
    short: int, long: int, context: int | None
) -> tuple[int, list[str], str | None]:
    """The long length that fits the server's context (with room for one reply token and the
    sizing's error), a note when it was cut, and why there is no figure when nothing fits."""
    if context is None:
        return long, [], None
    room = context - 1 - max(CONTEXT_MARGIN_TOKENS, int(context * CONTEXT_MARGIN_SHARE))
    if long <= room:
        return long, [], None
    if room <= short:
        return (
            long,
            [],
            (
                f"no prefill rate: the server's context ({context} tokens) leaves no room for a "
                f"prompt longer than the short one ({short} tokens)"
            ),
        )
    note = (
        f"prefill: the long prompt was cut from {long} to {room} tokens to fit the server's "
        f"context of {context} tokens"
    )
    return room, [note], None


# A prompt's length: the server's count, or (where it gives none) the tokenizer's.
Count = Callable[[RequestRecord], int | None]


def server_count(record: RequestRecord) -> int | None:
    return record.prompt_tokens


def _request(text: str) -> ChatRequest:
    return ChatRequest(prompt=text, max_tokens=1, ignore_eos=True, stream=True)


def _counted(record: RequestRecord, count: Count = server_count) -> bool:
    """A point of the figure: answered, a first token timed, the prompt counted."""
    return record.ok and record.first_token_s is not None and count(record) is not None


class PrefillRun:
    """One phase's requests and what it learned, kept for the detail."""

    def __init__(
        self, client: ChatClient, progress: ProgressFn, tokenizer: Path | None = None
    ) -> None:
        self.client = client
        self.progress = progress
        self.nonces = Nonces()
        self.tokenizer_path = tokenizer
        self.tokenizer: PromptTokenizer | None = None
        self.tokenizer_problem: str | None = None
        self.counts: dict[int, int] = {}  # by id(record): the tokenizer's count, where used

    async def send(self, words: int, nonce: str | None = None) -> RequestRecord:
        text = prompt_text(nonce or self.nonces.next(), words)
        record = await self.client.chat(_request(text))
        self.progress(1)
        if record.ok and record.prompt_tokens is None:
            tokenizer = await self._tokenizer()
            if tokenizer is not None:
                self.counts[id(record)] = tokenizer.count(text)
        return record

    def count(self, record: RequestRecord) -> int | None:
        """The server's count of the record's prompt, else the tokenizer's (None: neither)."""
        if record.prompt_tokens is not None:
            return record.prompt_tokens
        return self.counts.get(id(record))

    async def _tokenizer(self) -> PromptTokenizer | None:
        """The model's tokenizer, read once when first needed (a GGUF parses for seconds)."""
        if self.tokenizer is None and self.tokenizer_path and self.tokenizer_problem is None:
            try:
                self.tokenizer = await asyncio.to_thread(load_tokenizer, self.tokenizer_path)
            except UserError as exc:
                self.tokenizer_problem = str(exc)
        return self.tokenizer

    def no_count_reason(self) -> str:
        """Why no prompt has a length: no usage, and no tokenizer (or one that could not load)."""
        base = "no prefill rate: the server reports no usage.prompt_tokens, so the prompts' lengths"
        if self.tokenizer_problem is not None:
            return (
                f"{base} are unknown and the tokenizer could not be read: {self.tokenizer_problem}"
            )
        return (
            f"{base} are unknown and the model's tokenizer is not known (give --tokenizer; "
            "sagemeter does not guess a count)"
        )

    async def size(self, short_tokens: int) -> tuple[Sizing | None, list[RequestRecord], str]:
        """Two probes (a small prompt and one of the short length, guessed at a token per word)
        make the line; they also warm the server up. Without two counts: None and why."""
        probes = [await self.send(PROBE_WORDS), await self.send(max(short_tokens, PROBE_WORDS + 1))]
        failed = next((p for p in probes if not p.ok), None)
        if failed is not None:
            return None, probes, f"no prefill rate: a sizing request failed: {failed.error}"
        counts = [self.count(p) for p in probes]
        if any(count is None for count in counts):
            return None, probes, self.no_count_reason()
        small, large = counts[0] or 0, counts[1] or 0
        extra_words = max(short_tokens, PROBE_WORDS + 1) - PROBE_WORDS
        per_word = (large - small) / extra_words
        if per_word <= 0:
            return (
                None,
                probes,
                (
                    f"no prefill rate: the prompts were counted {small} and {large} tokens for "
                    "a shorter and a longer prompt"
                ),
            )
        overhead = small - per_word * PROBE_WORDS
        return Sizing(overhead, per_word), probes, ""


async def measure_prefill(
    client: ChatClient,
    *,
    short_tokens: int = 256,
    long_tokens: int = 4096,
    repeats: int = 5,
    context_tokens: int | None = None,
    progress: ProgressFn = no_progress,
    counters: PrefixCacheCounters | None = None,
    tokenizer: Path | None = None,
) -> PrefillDetail:
    """Size the text, alternate short and long prompts, then send one long prompt twice, with
    the server's own prefix-cache `counters` read around the pair (None: not read). Where the
    server counts no prompt, `tokenizer` (a GGUF file or a Hugging Face folder) counts them."""
    if long_tokens <= short_tokens:
        raise ValueError("long_tokens must exceed short_tokens")
    long_tokens, notes, blocking = clamp_to_context(short_tokens, long_tokens, context_tokens)
    detail = PrefillDetail(
        short_tokens=short_tokens,
        long_tokens=long_tokens,
        repeats=repeats,
        context_tokens=context_tokens,
    )
    if blocking:
        return _without_figure(detail, [blocking, *notes])
    run = PrefillRun(client, progress, tokenizer)
    sizing, detail.probe_records, why = await run.size(short_tokens)
    if sizing is None:
        return _without_figure(detail, [why, *notes])
    detail.short_words = sizing.words_for(short_tokens)
    detail.long_words = sizing.words_for(long_tokens)
    cpu = CpuClock()
    short, long, aside, again = await _points(run, detail, repeats)
    records = [*short, *long]
    timed = sum(r.first_token_s or 0.0 for r in records)
    detail.client = client_share(len(records), cpu.elapsed(), timed)
    detail.prefix_cache = await _cache_pair(run, detail.long_words, counters)
    if run.counts and run.tokenizer is not None:
        detail.prompt_count_source = f"tokenizer: {run.tokenizer.source}"
        notes.append(
            f"prefill: the server reports no usage.prompt_tokens; the prompts were counted by "
            f"the model's tokenizer ({run.tokenizer.source}): their text alone, so the chat "
            "template's tokens (the same for every prompt) are in the fixed cost, not the lengths"
        )
    return fit_prefill(
        detail, short, long, aside=aside, measured_again=again, notes=notes, count=run.count
    )


async def _points(
    run: PrefillRun, detail: PrefillDetail, repeats: int
) -> tuple[list[RequestRecord], list[RequestRecord], list[RequestRecord], list[str]]:
    """Short and long prompts in turn until each length has `repeats` counted points that
    agree; stalled ones set aside and asked again, a bounded number of rounds."""
    short: list[RequestRecord] = []
    long: list[RequestRecord] = []
    aside: list[RequestRecord] = []
    again: list[str] = []
    sends = rounds = extra = 0  # extra: points set aside, each owed one more send
    lengths = ((detail.short_words or 1, short), (detail.long_words or 1, long))
    while sends < 2 * repeats + AGAIN_LIMIT + extra:
        counted = [_kept(bucket, aside, run.count) for _, bucket in lengths]
        if all(len(found) >= repeats for found in counted):
            slow = _disagreeing("short", counted[0]) + _disagreeing("long", counted[1])
            slow = slow or _out_of_order(*counted)
            if not slow or rounds >= AGAIN_LIMIT:
                break
            rounds += 1
            for records, why in slow:
                aside.extend(records)
                again.append(why)
                extra += len(records)
            continue
        if any(r.ok and run.count(r) is None for r in (*short, *long)):
            break  # the server stopped counting prompts: asking again cannot make the rate
        sends += 1
        for (words, bucket), found in zip(lengths, counted, strict=True):
            if len(found) < repeats:
                bucket.append(await run.send(words))
    return short, long, aside, again


def _kept(
    bucket: list[RequestRecord], aside: list[RequestRecord], count: Count = server_count
) -> list[RequestRecord]:
    return [r for r in bucket if _counted(r, count) and not any(r is other for other in aside)]


def _disagreeing(label: str, records: list[RequestRecord]) -> list[tuple[list[RequestRecord], str]]:
    """The prompts whose first token came far later than the fastest of their length."""
    ttfts = [r.first_token_s or 0.0 for r in records]
    slow = [records[index] for index in too_slow(ttfts)]
    if not slow:
        return []
    worst = max(r.first_token_s or 0.0 for r in slow)
    return [
        (
            slow,
            f"{len(slow)} {label} prompts took up to {worst:.2f} s to a first token against "
            f"{min(ttfts):.2f} s for the fastest (a stall?)",
        )
    ]


async def _cache_pair(
    run: PrefillRun, words: int, counters: PrefixCacheCounters | None = None
) -> PrefixCacheCheck:
    """One fresh long prompt, then the very same prompt again: the second TTFT shows the cache,
    and the server's counters (where it has them) whether it says so too."""
    nonce = run.nonces.next()
    if counters is not None:
        await counters.before()
    first = await run.send(words, nonce)
    second = await run.send(words, nonce)
    said = await counters.after() if counters is not None else None
    check = PrefixCacheCheck(
        prompt_tokens=run.count(first),
        first_ttft_s=first.first_token_s,
        second_ttft_s=second.first_token_s,
        cached_tokens_reported=second.cached_prompt_tokens,
        records=[first, second],
    )
    if said is not None:
        check.server_reports_caching = said.reports_caching
        check.server_cache_queries, check.server_cache_hits = said.queries, said.hits
        check.server_counters_note = said.note
    failed = next((r for r in (first, second) if not r.ok), None)
    if failed is not None:
        check.problem = f"no speed-up: a send failed: {failed.error}"
    elif check.first_ttft_s and check.second_ttft_s:
        check.speedup = check.first_ttft_s / check.second_ttft_s
    else:
        check.problem = "no speed-up: a send brought no token"
    return check


# How a reason for setting short prompts aside by the lengths' order reads (`measured_again`).
OUT_OF_ORDER = "no faster than the long prompts' median"


def _out_of_order(
    short: list[RequestRecord], long: list[RequestRecord]
) -> list[tuple[list[RequestRecord], str]]:
    """The short prompts no faster to a first token than the long prompts' median, when the
    short median is not below it, and why (empty otherwise)."""
    short_s = [r.first_token_s or 0.0 for r in short]
    long_s = [r.first_token_s or 0.0 for r in long]
    late = [short[index] for index in out_of_order(short_s, long_s)]
    if not late:
        return []
    return [
        (
            late,
            f"{len(late)} short prompts took up to {max(r.first_token_s or 0.0 for r in late):.2f}"
            f" s to a first token, {OUT_OF_ORDER} of {median(long_s):.2f} s (a stall?)",
        )
    ]


def fit_prefill(
    detail: PrefillDetail,
    short: list[RequestRecord],
    long: list[RequestRecord],
    *,
    aside: list[RequestRecord] | None = None,
    measured_again: list[str] | None = None,
    notes: list[str] | None = None,
    count: Count = server_count,
) -> PrefillDetail:
    """The prefill figures from finished records; refuses a rate from failed, uncounted or
    disagreeing points, and says why. `count` gives a prompt's length (the server's)."""
    notes = [*(notes or []), *_failures("short", short), *_failures("long", long)]
    blocking: list[str] = []
    good_short, good_long = _kept(short, aside or [], count), _kept(long, aside or [], count)
    detail.records = [*short, *long]
    detail.measured_again = list(measured_again or [])
    detail.short_prompt_tokens = [count(r) or 0 for r in good_short]
    detail.long_prompt_tokens = [count(r) or 0 for r in good_long]
    detail.short_ttft_s = [r.first_token_s or 0.0 for r in good_short]
    detail.long_ttft_s = [r.first_token_s or 0.0 for r in good_long]
    detail.short_ttft = spread(detail.short_ttft_s)
    detail.long_ttft = spread(detail.long_ttft_s)
    engine = [r.engine_prompt_rate for r in good_long if r.engine_prompt_rate is not None]
    detail.engine_tokens_per_second = spread(engine)
    for label, found in (("short", good_short), ("long", good_long)):
        for _records, why in _disagreeing(label, found):
            blocking.append(f"no prefill rate: prompts of one length disagree: {why}")
    needed = detail.repeats
    if len(good_short) < needed or len(good_long) < needed:
        blocking.append(
            f"no prefill rate: {len(good_short)} short and {len(good_long)} long prompts were "
            f"answered with a prompt count, {needed} of each are needed"
        )
    else:
        _rate(detail, notes, blocking)
    detail.problems = [*blocking, *notes]
    detail.valid = not blocking and detail.tokens_per_second is not None
    if not detail.valid:
        detail.tokens_per_second = detail.per_call_fixed_cost_s = None
        detail.least_squares_tokens_per_second = detail.tokens_per_second_ci95 = None
    return detail


def _rate(detail: PrefillDetail, notes: list[str], blocking: list[str]) -> None:
    """The differential, its interval, the fixed cost and the least-squares line."""
    extra_tokens = median(detail.long_prompt_tokens) - median(detail.short_prompt_tokens)
    delta_t = median(detail.long_ttft_s) - median(detail.short_ttft_s)
    if extra_tokens <= 0:
        blocking.append("no prefill rate: the server counted the long prompts no longer")
        return
    if delta_t <= 0:
        blocking.append(
            "no prefill rate: long prompts were not slower to a first token"
            + order_stayed(detail.measured_again, OUT_OF_ORDER)
        )
        return
    rate = extra_tokens / delta_t
    detail.tokens_per_second = rate
    detail.tokens_per_second_ci95 = interval(prefill_samples(detail))
    fixed = median(detail.short_ttft_s) - median(detail.short_prompt_tokens) / rate
    if fixed >= 0:
        detail.per_call_fixed_cost_s = fixed
    else:
        notes.append(
            f"prefill: no per-call fixed cost: the two lengths put it at {fixed * 1000:.1f} ms, "
            "below zero (prompt tokens grew slower with the prompt's length)"
        )
    tokens = np.array([*detail.short_prompt_tokens, *detail.long_prompt_tokens], dtype=float)
    times = np.array([*detail.short_ttft_s, *detail.long_ttft_s])
    slope, _intercept = np.polyfit(tokens, times, 1)
    detail.least_squares_tokens_per_second = float(1.0 / slope) if slope > 0 else None


def _failures(label: str, records: list[RequestRecord]) -> list[str]:
    """Failed prompts are kept as records and never enter the figure; they were asked again, so
    a figure still short of points says so through the count."""
    failed = [r for r in records if not r.ok]
    return [f"prefill: {len(failed)} {label} prompts failed: {failed[0].error}"] if failed else []


def _without_figure(detail: PrefillDetail, problems: list[str]) -> PrefillDetail:
    detail.problems = problems
    detail.valid = False
    return detail
