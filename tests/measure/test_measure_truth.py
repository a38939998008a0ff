"""`measure` against the known-truth server, clean and misbehaving: every figure against truth.

Timing: 50 ms to the first token, then 10 ms per token. A perfect client sees a decode rate of
100 tokens/s, a per-call fixed cost of 50 ms, TTFT 50 ms, gaps of 10 ms, and a batch of N
16-token replies at N × 16 / 0.21 s tokens/s. The tolerances leave room for a busy shared
machine, yet a figure computed wrongly falls outside them: TTFT timed to the second token reads
60 ms, a retried request's wait in a batch's wall time costs at least 40%, a failed request
scored as a wrong answer changes the count.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.compare import combine
from sagemeter.errors import UserError
from sagemeter.evidence.verdict import MAX_UNANSWERED_SHARE
from sagemeter.measure.workflow import measure_target
from sagemeter.results import MeasureResult
from sagemeter.settings import MeasureSettings
from sagemeter.targets import parse_target
from tests.busy_host import batch_reasons, set_aside_by_a_busy_host

pytestmark = pytest.mark.alone  # timing against truth: the CPU to itself

TRUTH = TruthTiming(ttft_s=0.05, itl_s=0.01)
LOAD_TOKENS = 16


def _settings(**changes: object) -> MeasureSettings:
    base = MeasureSettings(
        short_tokens=4,
        long_tokens=24,
        decode_repeats=3,
        prefill_tokens=[],  # the prefill phase has tests of its own (test_measure_prefill.py)
        load_levels=[1, 8],
        load_max_tokens=LOAD_TOKENS,
        load_batches=2,
        questions_per_family=1,
        quality_max_tokens=8,
        timeout_s=5.0,
        stall_s=0.5,
        retries=3,
        batch_reruns=4,
    )
    return base.model_copy(update=changes)


def _measure(
    url: str, out: Path, settings: MeasureSettings | None = None, name: str = "truth"
) -> MeasureResult:
    result, path = asyncio.run(
        measure_target(parse_target(url), name=name, settings=settings or _settings(), out_dir=out)
    )
    assert path.is_file()
    return result


def _level_truth(concurrency: int) -> float:
    return TRUTH.tokens_per_second(concurrency, LOAD_TOKENS)


def _assert_streaming_truth(result: MeasureResult) -> None:
    assert result.decode_tokens_per_second == pytest.approx(1 / TRUTH.itl_s, rel=0.03)
    assert result.per_call_fixed_cost_seconds == pytest.approx(TRUTH.ttft_s, abs=0.008)
    assert result.ttft_median_ms is not None
    assert TRUTH.ttft_s * 1000 - 0.5 <= result.ttft_median_ms <= TRUTH.ttft_s * 1000 + 5
    assert result.inter_token_latency_median_ms == pytest.approx(TRUTH.itl_s * 1000, rel=0.05)


def _assert_level(result: MeasureResult, concurrency: int) -> None:
    figure = result.load_tokens_per_second.get(str(concurrency))
    assert figure == pytest.approx(_level_truth(concurrency), rel=0.05), concurrency


@pytest.mark.slow
def test_a_clean_server_gives_the_truth(tmp_path: Path) -> None:
    with running_truth_server(TRUTH) as url:
        result = _measure(url, tmp_path)
    assert result.complete is True and result.incomplete_because == []
    _assert_streaming_truth(result)
    for level in (1, 8):
        _assert_level(result, level)
    assert result.detail is not None
    assert result.detail.retries == 0 and result.detail.failed_requests == 0
    load = result.detail.load
    assert load is not None
    for level in load.levels:
        # a clean server's batches all count; one set aside besides is only a busy host's
        assert len(level.complete_batches) == 2, batch_reasons(level)
        aside = [batch.reason for batch in level.batches if not batch.complete]
        assert all(set_aside_by_a_busy_host(why) for why in aside), batch_reasons(level)
        assert level.client is not None and level.client.workers == 1
    decode = result.detail.decode
    assert decode is not None
    assert all(r.usage_tokens == r.events for r in decode.records)  # no token missed or added


@pytest.mark.slow
def test_empty_tokens_and_reasoning_are_token_events(tmp_path: Path) -> None:
    """vLLM streams "" for special tokens; a reasoning model thinks in `delta.reasoning` first.
    TTFT is the first token event, whatever it carries, and the counts agree with usage."""
    faults = Faults(empty_every=3, reasoning_tokens=5)
    with running_truth_server(TRUTH, faults=faults) as url:
        result = _measure(url, tmp_path)
    assert result.complete is True
    _assert_streaming_truth(result)
    _assert_level(result, 8)
    assert result.detail is not None and result.detail.decode is not None
    long = [r for r in result.detail.decode.records if r.max_tokens == 24]
    assert long and all(r.events == r.usage_tokens == 24 for r in long)
    assert all(r.reasoning_events == 5 for r in long)
    assert result.detail.decode.reasoning_events == 5 * len(long)
    assert not any("disagree" in warning for warning in result.detail.warnings)


@pytest.mark.slow
def test_a_usage_count_that_lies_is_flagged_per_phase(tmp_path: Path) -> None:
    """The server's usage says 3 tokens more than it streamed: every decode and parallel reply
    disagrees with its token events, by +3, and the result says so (load's rule, shared)."""
    with running_truth_server(TRUTH, faults=Faults(usage_offset=3)) as url:
        result = _measure(url, tmp_path, _settings(load_levels=[2]))
    assert result.detail is not None and result.detail.decode is not None
    decode_replies = len(result.detail.decode.records)
    warnings = [w for w in result.detail.warnings if "disagree" in w]
    assert warnings == [
        f"decode: {decode_replies} of {decode_replies} replies: usage and content events "
        "disagree by +3 tokens (usage − events; e.g. usage 7 tokens, 4 content events)",
        "2 at once: 4 of 4 replies: usage and content events disagree by +3 tokens (usage − "
        f"events; e.g. usage {LOAD_TOKENS + 3} tokens, {LOAD_TOKENS} content events)",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("status", [503, 429])
def test_errors_with_retry_after_are_sent_again_and_never_become_figures(
    tmp_path: Path, status: int
) -> None:
    """Overloaded (503) or rate limited (429): both are sent again after the wait the server
    asked for, and neither becomes a figure."""
    faults = Faults(fail_every=4, fail_status=status, retry_after_s=0.1)
    # One rerun a level: at 1 at once a batch sent again is replaced and the level counts; at 8
    # every batch holds a failure, so it has no figure whatever the count (4 reruns took 3 s more).
    with running_truth_server(TRUTH, faults=faults) as url:
        result = _measure(url, tmp_path, _settings(batch_reruns=1))
    _assert_streaming_truth(result)
    detail = result.detail
    assert detail is not None and detail.quality is not None and detail.load is not None
    assert detail.retries > 0 and detail.failed_requests == 0
    waits = [
        attempt.waited_s
        for record in (detail.decode.records if detail.decode else [])
        for attempt in record.attempts
    ]
    assert waits and all(wait == pytest.approx(0.1) for wait in waits)  # Retry-After honoured
    assert all(f"HTTP {status}" in a.error for r in detail.decode.records for a in r.attempts)  # type: ignore[union-attr]
    # Every question was answered (after its retries), none scored as wrong for an error.
    assert detail.quality.answered_count == detail.quality.total
    assert result.quality is not None and result.quality.endswith(f"/{detail.quality.total}")
    assert [level.tokens_per_second is None for level in detail.load.levels] == [False, True]
    for level in detail.load.levels:
        counted = level.complete_batches
        assert all(batch.retries == 0 for batch in counted)
        if level.tokens_per_second is None:
            assert level.problem is not None and "sent again" in level.problem
        else:
            _assert_level(result, level.concurrency)


@pytest.mark.slow
def test_a_stall_mid_reply_is_cut_and_sent_again(tmp_path: Path) -> None:
    faults = Faults(stall_every=5, stall_s=3.0, stall_after=3)
    # Cut after 0.25 s of silence (25 token gaps; the server stalls 3 s): each stall is waited
    # out once before it is cut, so a shorter limit is less time waiting, the same check.
    with running_truth_server(TRUTH, faults=faults) as url:
        result = _measure(url, tmp_path, _settings(load_levels=[1], stall_s=0.25))
    _assert_streaming_truth(result)
    _assert_level(result, 1)
    assert result.detail is not None and result.detail.decode is not None
    stalled = [a for r in result.detail.decode.records for a in r.attempts]
    assert stalled and all(a.error.startswith("stalled: no byte for") for a in stalled)
    assert all(r.total_s < 1.0 for r in result.detail.decode.records if r.ok)


@pytest.mark.slow
def test_cut_streams_are_failures_and_their_batches_do_not_count(tmp_path: Path) -> None:
    faults = Faults(drop_every=4, drop_after=3)
    # One rerun a level, as for Retry-After: at 1 at once a cut batch is replaced and the level
    # counts; at 8 every batch holds a cut stream, so more reruns only wait (0.7 s).
    with running_truth_server(TRUTH, faults=faults) as url:
        result = _measure(url, tmp_path, _settings(batch_reruns=1))
    _assert_streaming_truth(result)  # cut replies were asked again, never timed
    detail = result.detail
    assert detail is not None and detail.load is not None
    assert detail.failed_requests > 0
    for level in detail.load.levels:
        for batch in level.batches:
            assert batch.complete == (batch.failed == 0)
        if level.tokens_per_second is not None:
            _assert_level(result, level.concurrency)
        else:
            assert result.complete is False
            assert any(f"{level.concurrency} at once" in m for m in result.incomplete_because)


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        (Faults(silent=True), "timeout: no complete response within 1 s"),
        (Faults(answer="html"), "not JSON: b'<html>"),
        (Faults(answer="no-choices"), "without chat `choices`"),
        (Faults(fail_every=1, fail_status=401), "HTTP 401"),
    ],
)
def test_a_target_that_is_not_a_chat_api_stops_before_anything(
    tmp_path: Path, faults: Faults, message: str
) -> None:
    with (
        running_truth_server(TRUTH, faults=faults) as url,
        pytest.raises(UserError, match="does not answer as a chat API") as caught,
    ):
        _measure(url, tmp_path, _settings(timeout_s=1.0))
    assert message in str(caught.value)
    assert not list(tmp_path.glob("measure-*.json"))


def test_nothing_listening_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"cannot connect to 127\.0\.0\.1:1: Connection refused"):
        _measure("http://127.0.0.1:1", tmp_path)
    assert not list(tmp_path.glob("measure-*.json"))


# What the command-line tests check is exit codes, reasons and the key, not quality: three
# questions of 8 tokens, not --quick's six of 24 (1.5 s a run at this server's pace).
FEW_QUESTIONS = ("--questions-per-family", "1", "--quality-max-tokens", "8")


def _sagemeter(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    # No key from this machine's environment: a test says which key, if any, is sent.
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["SAGEMETER_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args], capture_output=True, text=True, env=env
    )


@pytest.mark.slow
def test_the_command_exits_2_or_3_and_says_why(tmp_path: Path) -> None:
    common = ["--quick", "--timeout", "2s", "--stall", "500ms", "--levels", "1,4", *FEW_QUESTIONS]
    with running_truth_server(TRUTH, faults=Faults(answer="html")) as url:
        refused = _sagemeter("measure", str(tmp_path / "a"), url, *common, home=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "does not answer as a chat API" in refused.stderr
    assert not (tmp_path / "a").exists()  # the folder it made, left empty, is gone
    # Every third stream cut (the preflight is the first two): no batch of 4 can be complete.
    # One decode pair: its cut replies are sent again after a backoff, and decode is not checked.
    faults = Faults(drop_every=3, drop_after=2)
    with running_truth_server(TRUTH, faults=faults) as url:
        again = ("--reruns", "1", "--repeats", "1")
        partial = _sagemeter("measure", str(tmp_path / "b"), url, *common, *again, home=tmp_path)
    assert partial.returncode == 3, partial.stderr
    assert "incomplete: " in partial.stderr and "4 at once" in partial.stderr
    written = json.loads(next((tmp_path / "b").glob("measure-*.json")).read_text())
    assert written["complete"] is False
    assert written["load_tokens_per_second"]["4"] is None  # asked for, no figure: null
    assert any(reason.startswith("4 at once") for reason in written["incomplete_because"])


@pytest.mark.slow
def test_the_api_key_is_sent_by_the_main_process_and_by_the_batch_workers(tmp_path: Path) -> None:
    """The server refuses generations without `Authorization: Bearer KEY`: the preflight and
    decode (this process) and every parallel batch (worker processes) must carry the key."""
    key = "sk-truth-test-4242"
    common = ["--quick", "--timeout", "2s", "--stall", "500ms", "--levels", "1,4", *FEW_QUESTIONS]
    with running_truth_server(TRUTH, faults=Faults(require_key=key)) as url:
        without = _sagemeter("measure", str(tmp_path / "none"), url, *common, home=tmp_path)
        keyed_args = (*common, "--repeats", "1", "--api-key", key)  # one decode pair: not checked
        keyed = _sagemeter("measure", str(tmp_path / "keyed"), url, *keyed_args, home=tmp_path)
    assert without.returncode == 2, without.stderr
    assert "does not answer as a chat API" in without.stderr and "HTTP 401" in without.stderr
    assert keyed.returncode == 0, keyed.stderr
    text = next((tmp_path / "keyed").glob("measure-*.json")).read_text()
    written = json.loads(text)
    assert written["complete"] is True and written["detail"]["failed_requests"] == 0
    assert set(written["load_tokens_per_second"]) == {"1", "4"}
    levels = written["detail"]["load"]["levels"]
    assert all(level["client"]["workers"] >= 1 for level in levels)  # sent by worker processes
    assert all(batch["failed"] == 0 for level in levels for batch in level["batches"])
    assert key not in text and key not in keyed.stdout + keyed.stderr  # never written or shown


@pytest.mark.slow
def test_unanswered_questions_leave_quality_open_and_the_verdict_inconclusive(
    tmp_path: Path,
) -> None:
    """Every third request fails and is not sent again: some questions go unanswered. The
    quality is `correct/answered`, the result incomplete, and a verdict against a clean run is
    INCONCLUSIVE because more than a tenth of the questions are missing."""
    # One decode pair: decode is not what this test checks (0.5 s a run less).
    settings = _settings(load_levels=[1], retries=0, questions_per_family=2, decode_repeats=1)
    with running_truth_server(TRUTH) as url:
        clean = _measure(url, tmp_path, settings, name="a")
    with running_truth_server(TRUTH, faults=Faults(fail_every=3)) as url:
        holed = _measure(url, tmp_path, settings, name="b")
    assert clean.complete is True
    assert holed.detail is not None and holed.detail.quality is not None
    quality = holed.detail.quality
    unanswered = quality.total - quality.answered_count
    assert unanswered / quality.total > MAX_UNANSWERED_SHARE and quality.answered_count > 0
    assert holed.quality == f"{quality.correct}/{quality.answered_count}"
    assert holed.complete is False
    assert any(
        reason.startswith(
            f"quality: {unanswered} of {quality.total} questions unanswered (HTTP 500"
        )
        for reason in holed.incomplete_because
    ), holed.incomplete_because
    (check,) = combine([tmp_path / "measure-a.json", tmp_path / "measure-b.json"]).quality_checks
    assert check.verdict == "INCONCLUSIVE"
    assert check.paired_verdict is not None
    assert check.paired_verdict.reason.startswith(f"{unanswered} of {quality.total} questions")
    assert "went unanswered" in check.paired_verdict.reason
