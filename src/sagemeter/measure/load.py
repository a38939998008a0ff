"""Parallel requests: N at once, fixed-length replies, two batches per level.

Throughput of a batch = its output tokens / its wall time (first send to last byte). A level's
figure pools its complete batches (all tokens / all wall time), or with the article's method is
the median of their rates; every batch and request is kept.

A batch counts only when every request succeeded at its first try and the client kept up: a
failed request leaves tokens out, a retried one adds its wait to the wall time, and a client that
fell behind timed itself. Such a batch is kept with its reason and run again, up to `reruns`
extra batches per level; a level with no complete batch has no figure and says why. Batches
that disagree, and levels that contradict each other, are run again and then flagged
(measure/agreement.py): a stall never becomes a figure.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence

from sagemeter.evidence.bootstrap import interval
from sagemeter.evidence.distribution import spread
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.agreement import AGAIN_LIMIT, level_doubt, level_doubt_from_above, too_slow
from sagemeter.measure.deadline import Deadline
from sagemeter.measure.figure_samples import level_figure, level_samples
from sagemeter.measure.identity_span import AfterLevel, dropped_level, spanned_reason
from sagemeter.measure.precision import counted_half_width, precision_stop
from sagemeter.results import ClientShare, LoadBatch, LoadDetail, LoadLevel
from sagemeter.transport.chat import BatchRun, ChatClient, ChatRequest

TOPICS = (
    "a lighthouse keeper",
    "a mountain railway",
    "a clockmaker's apprentice",
    "a desert caravan",
    "a lost satellite",
    "a night market",
    "an old river boat",
    "a glacier expedition",
)


# One batch's requests, given how many go at once.
BatchRequests = Callable[[int], list[ChatRequest]]


def load_request_count(levels: Sequence[int], batches: int) -> int:
    return sum(levels) * batches


def batch_requests(
    concurrency: int, max_tokens: int, prompt: str | None = None
) -> list[ChatRequest]:
    """`concurrency` requests on rotating topics (so no two neighbours share a prompt cache),
    or all with the one `prompt` given (the article's method)."""
    return [
        ChatRequest(
            prompt=prompt or f"Write a long story about {TOPICS[index % len(TOPICS)]}.",
            max_tokens=max_tokens,
            ignore_eos=True,
            stream=True,
        )
        for index in range(concurrency)
    ]


def summarise_batch(concurrency: int, run: BatchRun) -> LoadBatch:
    """The batch's throughput and whether it counts (with the reason when it does not)."""
    records = run.records
    failed = [record for record in records if not record.ok]
    retried = [record for record in records if record.retries]
    short = [r for r in records if r.ok and r.max_tokens is not None and r.tokens < r.max_tokens]
    reason = None
    if run.failure is not None:
        reason = f"not sent: {run.failure}"
    elif failed:
        reason = f"{len(failed)} of {concurrency} requests failed: {failed[0].error}"
    elif retried:
        reason = (
            f"{len(retried)} of {concurrency} requests were sent again after "
            f"{retried[0].attempts[0].error}: their waits are in the wall time"
        )
    elif run.limits:
        reason = f"the client may have set the pace: {run.limits[0]}"
    elif short:
        reason = (
            f"{len(short)} replies stopped early ({short[0].tokens} of {short[0].max_tokens} "
            "tokens): the server did not honour ignore_eos"
        )
    tokens = sum(record.tokens for record in records if record.ok)
    wall = run.wall_s
    return LoadBatch(
        concurrency=concurrency,
        wall_s=wall,
        output_tokens=tokens,
        failed=len(failed) if run.failure is None else concurrency,
        tokens_per_second=tokens / wall if wall > 0 else 0.0,
        complete=reason is None,
        reason=reason,
        retries=sum(record.retries for record in records),
    )


def _client_share(runs: list[BatchRun], walls: float) -> ClientShare | None:
    calls = sum(len(run.records) for run in runs)
    if calls == 0 or walls <= 0:
        return None
    cpu = sum(run.client_cpu_s for run in runs)
    lags = [run.loop_lag_p99_s for run in runs if run.loop_lag_p99_s is not None]
    return ClientShare(
        calls=calls,
        client_cpu_s=cpu,
        timed_wall_s=walls,
        cpu_per_call_ms=cpu / calls * 1000.0,
        share=cpu / walls,
        workers=max(run.workers for run in runs),
        loop_lag_p99_s=max(lags) if lags else None,
    )


async def measure_level(
    client: ChatClient,
    concurrency: int,
    *,
    max_tokens: int,
    batches: int,
    reruns: int,
    prompt: str | None = None,
    statistic: str = "pooled",
    pause_s: float = 0.0,
    progress: ProgressFn = no_progress,
    prior: LoadLevel | None = None,
    requests: BatchRequests | None = None,
    precision: float | None = None,
    max_batches: int | None = None,
) -> LoadLevel:
    """`batches` complete batches of `concurrency` at once, running up to `reruns` more; after
    each batch, `pause_s` of quiet (outside every timed wall).

    A complete batch far slower than the level's fastest (measure/agreement.py) is set aside and
    run again, up to AGAIN_LIMIT rounds; if they still disagree the level has no figure. `prior`:
    this level measured before and set aside whole; its batches and records are kept, not counted.
    `requests` makes each batch's requests (default: `batch_requests`, the story prompts).
    With `precision` (0.03: 3%), batches go on past `batches` until the level's 95% interval's
    half-width is within that share of its figure, or `max_batches` complete batches are in.
    """
    least = batches
    runs: list[BatchRun] = []
    summaries: list[LoadBatch] = []
    again: list[str] = list(prior.measured_again) if prior else []
    extra = rounds = 0
    disagreement = None
    while True:
        while (
            sum(b.complete for b in summaries) < batches
            and len(summaries) < batches + reruns + extra
        ):
            sent = (
                requests(concurrency)
                if requests is not None
                else batch_requests(concurrency, max_tokens, prompt)
            )
            run = await client.batch(sent)
            progress(concurrency if len(summaries) < batches else 0)
            runs.append(run)
            summaries.append(summarise_batch(concurrency, run))
            if pause_s > 0:
                await asyncio.sleep(pause_s)
        counted = [index for index, batch in enumerate(summaries) if batch.complete]
        slow = [counted[i] for i in too_slow([summaries[i].wall_s for i in counted])]
        if not slow:
            if _wants_more(concurrency, summaries, batches, statistic, precision, max_batches):
                batches += 1  # not precise enough yet: one more batch
                continue
            break
        fastest = min(summaries[i].wall_s for i in counted)
        why = (
            f"a batch took {max(summaries[i].wall_s for i in slow):.2f} s against "
            f"{fastest:.2f} s for the level's fastest (a stall?)"
        )
        if rounds >= AGAIN_LIMIT:
            disagreement = f"no figure: its batches still disagree after {rounds} reruns: {why}"
            break
        rounds += 1
        extra += len(slow)
        again.append(f"{len(slow)} of {len(counted)} batches set aside and run again: {why}")
        for index in slow:
            summaries[index] = summaries[index].model_copy(
                update={"complete": False, "reason": f"set aside: {why}"}
            )
    counted_runs = [run for run, batch in zip(runs, summaries, strict=True) if batch.complete]
    good = [record for run in counted_runs for record in run.records]
    ttfts = [r.first_token_s for r in good if r.first_token_s is not None]
    level = LoadLevel(
        concurrency=concurrency,
        batches=[*(prior.batches if prior else []), *summaries],
        ttft_s=spread(ttfts),
        counted_ttft_s=ttfts,
        inter_token_latency_s=spread([gap for r in good for gap in r.gaps_s()]),
        reasoning_events=sum(r.reasoning_events for r in good),
        records=[
            *(prior.records if prior else []),
            *(record for run in runs for record in run.records),
        ],
        client=_client_share(runs, sum(batch.wall_s for batch in summaries)),
        measured_again=again,
    )
    complete = level.complete_batches
    if disagreement is not None:
        level.problem = disagreement
        return level
    level.tokens_per_second = level_figure(level, statistic)
    if level.tokens_per_second is not None:
        level.tokens_per_second_ci95 = interval(level_samples(level, statistic))
    if precision is not None:
        level.precision = precision_stop(
            level.tokens_per_second, level.tokens_per_second_ci95, precision, batches, least,
            max(least, max_batches or least), f"{concurrency}-at-once throughput",
            _shortest_wall_s(complete),
        )  # fmt: skip
    if len(complete) < batches:
        reasons = [batch.reason for batch in summaries if batch.reason]
        level.problem = (
            f"{len(complete)} of {batches} batches complete after {len(summaries)} tries; "
            f"last reason: {reasons[-1]}"
        )
        if not complete:
            level.problem = f"no figure: {level.problem}"
    return level


def _wants_more(
    concurrency: int,
    summaries: list[LoadBatch],
    batches: int,
    statistic: str,
    precision: float | None,
    max_batches: int | None,
) -> bool:
    """Whether another batch is due: a precision is set, every batch asked for is complete, the
    maximum is not in, and the level's 95% interval is still too wide."""
    complete = sum(batch.complete for batch in summaries)
    if precision is None or complete < batches or complete >= (max_batches or 0):
        return False
    so_far = LoadLevel(concurrency=concurrency, batches=summaries)
    figure = level_figure(so_far, statistic)
    samples = interval(level_samples(so_far, statistic))
    span = _shortest_wall_s(so_far.complete_batches)
    return counted_half_width(figure, samples, span) > precision


def _shortest_wall_s(batches: list[LoadBatch]) -> float | None:
    """The shortest complete batch: the span its throughput's clock tick counts against."""
    return min((batch.wall_s for batch in batches), default=None)


def set_aside(level: LoadLevel, why: str) -> LoadLevel:
    """The level with every batch no longer counted (kept, with `why`), to be measured again."""
    return level.model_copy(
        update={
            "batches": [
                batch.model_copy(update={"complete": False, "reason": f"set aside: {why}"})
                if batch.complete
                else batch
                for batch in level.batches
            ],
            "measured_again": [*level.measured_again, f"the level was run again: {why}"],
        }
    )


async def measure_load(
    client: ChatClient,
    *,
    levels: Sequence[int] = (1, 4, 16),
    max_tokens: int = 256,
    batches: int = 2,
    reruns: int = 2,
    prompt: str | None = None,
    statistic: str = "pooled",
    pause_s: float = 0.0,
    progress: ProgressFn = no_progress,
    one_at_once_expected: float | None = None,
    requests: BatchRequests | None = None,
    precision: float | None = None,
    max_batches: int | None = None,
    deadline: Deadline | None = None,
    after_level: AfterLevel | None = None,
) -> LoadDetail:
    """Every level in turn. A level far below a smaller one, or 1 at once far below what the
    decode rate predicts (`one_at_once_expected`), is run once more; if it stays, no figure.
    Once every level is done, a level far below what a larger one makes per stream is run once
    more too. `requests` makes each batch's requests (default: the story prompts). Past
    `deadline` no level is begun: the rest are kept without a figure, saying why.
    `after_level` (the server-identity check) is awaited after each level: a change it names
    drops that level's figures, leaves the rest unmeasured and runs nothing again."""
    measure = functools.partial(
        measure_level,
        client,
        max_tokens=max_tokens,
        batches=batches,
        reruns=reruns,
        prompt=prompt,
        statistic=statistic,
        pause_s=pause_s,
        progress=progress,
        requests=requests,
        precision=precision,
        max_batches=max_batches,
    )
    results: list[LoadLevel] = []
    for concurrency in levels:
        if deadline is not None and (cut := deadline.passed("parallel")):
            problem = f"not measured: {cut}"
            results.append(LoadLevel(concurrency=concurrency, problem=problem, batches=[]))
            continue
        smaller = [
            (done.concurrency, done.tokens_per_second)
            for done in results
            if done.tokens_per_second is not None
        ]
        level = await measure(concurrency)
        doubt = level_doubt(concurrency, level.tokens_per_second, smaller, one_at_once_expected)
        if doubt is not None:
            prior = set_aside(level, doubt)
            level = await measure(concurrency, prior=prior, progress=no_progress)
            still = level_doubt(concurrency, level.tokens_per_second, smaller, one_at_once_expected)
            if still is not None:
                level.tokens_per_second = level.tokens_per_second_ci95 = None
                level.problem = f"no figure: run again, it stayed: {still}"
        results.append(level)
        if after_level is not None and (changed := await after_level(concurrency)):
            results[-1] = dropped_level(level, spanned_reason(changed))
            rest = levels[len(results) :]
            problem = f"not measured: {changed}"
            results += [LoadLevel(concurrency=c, problem=problem, batches=[]) for c in rest]
            return LoadDetail(max_tokens=max_tokens, batches_per_level=batches, levels=results)
    for index, level in enumerate(results):
        larger = [
            (done.concurrency, done.tokens_per_second)
            for done in results[index + 1 :]
            if done.tokens_per_second is not None
        ]
        doubt = level_doubt_from_above(level.concurrency, level.tokens_per_second, larger)
        if doubt is None:
            continue
        if deadline is not None and (cut := deadline.passed("parallel")):
            level.tokens_per_second = level.tokens_per_second_ci95 = None
            level.problem = f"no figure: {doubt}; not run again: {cut}"
            continue
        prior = set_aside(level, doubt)
        again = await measure(level.concurrency, prior=prior, progress=no_progress)
        still = level_doubt_from_above(again.concurrency, again.tokens_per_second, larger)
        if still is not None:
            again.tokens_per_second = again.tokens_per_second_ci95 = None
            again.problem = f"no figure: run again, it stayed: {still}"
        results[index] = again
    return LoadDetail(max_tokens=max_tokens, batches_per_level=batches, levels=results)
