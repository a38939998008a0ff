"""A merge of shard files recomputes exactly the figures one run makes from the same records."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.loadgen.build import build_result
from sagemeter.loadgen.files import load_result, write_result
from sagemeter.loadgen.result import LoadResult, WorkerSummary
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.loadgen.shards import merge_shards
from sagemeter.request_record import RequestRecord
from sagemeter.transport.pool import RunOutput

TOKENS = 12
WALL_START = 1_700_000_000.0
# Shard 1 started this much later on the wall clock (µs): its own timeline starts there.
SHARD_OFFSET_US = 250_000
FIGURES = (
    "output_tokens_per_second",
    "ttft_s",
    "tpot_s",
    "itl_s",
    "decode_tokens_per_second",
    "requests_completed",
    "requests_failed",
    "output_tokens",
    "achieved_concurrency",
    "window",
    "goodput",
    "tokens",
)


def _request(stream: int, index: int, send_us: int, scheduled_us: int | None) -> RequestRecord:
    """A reply whose timing varies a little with its numbers, so every figure has a spread."""
    ttft = 40_000 + (stream * 7 + index * 13) % 9 * 1_000
    gaps = [3_000 + (stream + index + k) % 4 * 500 for k in range(TOKENS - 1)]
    arrivals = [send_us + ttft]
    for gap in gaps:
        arrivals.append(arrivals[-1] + gap)
    return RequestRecord(
        stream=stream,
        index=index,
        scheduled_us=scheduled_us,
        send_us=send_us,
        end_us=arrivals[-1] + 3_000,
        arrivals_us=arrivals,
        usage_tokens=TOKENS,
        engine_tokens=None,
        finish_reason="length",
        done=True,
        error=None,
    )


def _closed_records(streams: int, per_stream: int) -> list[RequestRecord]:
    records = []
    for stream in range(streams):
        send = 300 * stream
        for index in range(per_stream):
            record = _request(stream, index, send, None)
            records.append(record)
            send = record.end_us + 150
    return records


def _poisson_records(count: int) -> list[RequestRecord]:
    return [_request(-1, i, i * 21_000 + 400, i * 21_000) for i in range(count)]


def _run(records: list[RequestRecord], wall_start: float, workers: int = 2) -> RunOutput:
    return RunOutput(
        wall_start=wall_start,
        startup_s=0.2,
        records=sorted(records, key=lambda r: r.send_us),
        loop_lag_us=[100, 200, 300, 50],
        workers=[
            WorkerSummary(
                worker=w,
                loop="uvloop",
                requests=1,
                run_s=2.0,
                cpu_run_s=0.1,
                cpu_total_s=0.3,
                start_late_s=0.0,
            )
            for w in range(workers)
        ],
        parent_cpu_s=0.01,
        cores=2,
    )


def _shard_files(
    tmp_path: Path, settings: LoadSettings, records: list[RequestRecord], in_shard_1: object
) -> list[Path]:
    """Two shard files: shard 1's records on its own timeline, starting SHARD_OFFSET_US later."""
    paths = []
    for shard in (0, 1):
        mine = [r for r in records if bool(in_shard_1(r)) == (shard == 1)]
        offset = SHARD_OFFSET_US * shard
        run = _run([r.shifted(-offset) for r in mine], WALL_START + offset * 1e-6)
        shard_settings = settings.model_copy(update={"shard_index": shard, "shard_count": 2})
        asked = len({r.stream for r in mine}) if settings.mode == "closed" else None
        result = build_result(shard_settings, run, asked, wall_s=3.0, include_raw=True)
        path = tmp_path / f"shard-{shard}.json"
        write_result(path, result)
        paths.append(path)
    return paths


def _assert_same_figures(merged: LoadResult, whole: LoadResult) -> None:
    for name in FIGURES:
        assert getattr(merged, name) == getattr(whole, name), name


def test_closed_loop_merge_equals_the_unsharded_figures(tmp_path: Path) -> None:
    settings = LoadSettings(
        target="http://127.0.0.1:9", concurrency=5, max_tokens=TOKENS, slo_ttft_s=0.045
    )
    records = _closed_records(streams=5, per_stream=6)
    whole = build_result(settings, _run(records, WALL_START, workers=4), 5, wall_s=3.0)
    paths = _shard_files(tmp_path, settings, records, lambda r: r.stream >= 3)
    shards = [load_result(path) for path in reversed(paths)]
    merged = merge_shards(shards)
    _assert_same_figures(merged, whole)
    assert merged.asked_concurrency == 5
    assert merged.client_cpu_s == pytest.approx(sum(s.client_cpu_s for s in shards))
    assert merged.shard is not None and merged.shard.index is None and merged.shard.count == 2
    assert merged.shard.wall_start == WALL_START
    assert len(merged.self_awareness.workers) == 4
    assert merged.valid == whole.valid


def test_poisson_merge_equals_the_unsharded_figures(tmp_path: Path) -> None:
    settings = LoadSettings(
        target="http://127.0.0.1:9", rate=40.0, max_tokens=TOKENS, duration_s=2.0, seed=5
    )
    records = _poisson_records(60)
    whole = build_result(settings, _run(records, WALL_START, workers=4), None, wall_s=3.0)
    paths = _shard_files(tmp_path, settings, records, lambda r: r.index % 2 == 1)
    merged = merge_shards([load_result(path) for path in paths])
    _assert_same_figures(merged, whole)
    assert merged.self_awareness.send_lag_s == whole.self_awareness.send_lag_s


def test_an_invalid_shard_makes_the_merge_invalid(tmp_path: Path) -> None:
    settings = LoadSettings(target="http://127.0.0.1:9", concurrency=4, max_tokens=TOKENS)
    records = _closed_records(streams=4, per_stream=5)
    paths = _shard_files(tmp_path, settings, records, lambda r: r.stream >= 2)
    shards = [load_result(path) for path in paths]
    # Shard 1 asked for 3 streams but ran 2: it is invalid on its own, and so is the merge.
    broken = build_result(
        shards[1].settings,
        _run([r.shifted(-SHARD_OFFSET_US) for r in records if r.stream >= 2], WALL_START + 0.25),
        3,
        3.0,
        True,
    )
    merged = merge_shards([shards[0], broken])
    assert not broken.valid and not merged.valid
    assert any(
        reason.startswith("shard 1: achieved concurrency") for reason in merged.invalid_because
    )


def test_merging_wrong_files_is_a_user_error(tmp_path: Path) -> None:
    settings = LoadSettings(target="http://127.0.0.1:9", concurrency=4, max_tokens=TOKENS)
    records = _closed_records(streams=4, per_stream=5)
    first, second = (
        load_result(p) for p in _shard_files(tmp_path, settings, records, lambda r: r.stream >= 2)
    )
    with pytest.raises(UserError, match=r"give each of 0\.\.1 once"):
        merge_shards([first, first])
    with pytest.raises(UserError, match=r"give each of 0\.\.1 once"):
        merge_shards([first])
    other = second.model_copy(
        update={"settings": second.settings.model_copy(update={"max_tokens": 99})}
    )
    with pytest.raises(UserError, match="max_tokens"):
        merge_shards([first, other])
    plain = build_result(settings, _run(records, WALL_START), 4, 3.0)
    with pytest.raises(UserError, match="not a shard"):
        merge_shards([plain, second])
    bad = tmp_path / "bad.json"
    bad.write_text('{"valid": true}')
    with pytest.raises(UserError, match="not a load result"):
        load_result(bad)
