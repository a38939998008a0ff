"""`measure --quick` end to end on the embedded engine: start, measure, stop, one valid file."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.measure.workflow import measure_target, selected_questions, total_requests
from sagemeter.results import load_result
from sagemeter.settings import quick_settings
from sagemeter.targets import parse_target

pytestmark = pytest.mark.slow


def test_measure_quick_on_the_embedded_engine(tmp_path: Path) -> None:
    settings = quick_settings()
    advanced: list[int] = []
    phases: list[str] = []
    result, path = asyncio.run(
        measure_target(
            parse_target("local:smollm2-q4_1"),
            name="smollm2-q4_1",
            settings=settings,
            out_dir=tmp_path,
            progress=advanced.append,
            on_phase=phases.append,
        )
    )
    assert path == tmp_path / "measure-smollm2-q4_1.json"
    assert load_result(path) == result
    planned = total_requests(settings, len(selected_questions(settings).questions))
    assert result.detail is not None and result.detail.decode is not None
    asked_again = result.detail.decode.measured_again or any(
        level.measured_again for level in (result.detail.load.levels if result.detail.load else [])
    )
    # Progress counts every request sent: more than planned only when a stall was asked again.
    assert sum(advanced) == planned or (asked_again and sum(advanced) > planned)
    # Lines while the engine starts ("starting: 1 s; log: …") come between the phases' names.
    named = [phase for phase in phases if not phase.startswith("starting: ")]
    assert named == ["starting", "preflight", "decode", "parallel", "quality"]

    assert result.decode_tokens_per_second is not None and result.decode_tokens_per_second > 1
    fixed = result.per_call_fixed_cost_seconds
    if fixed is None:  # a tiny model's tokens slow with length: the fit can fall below zero
        assert result.detail is not None
        assert any("no per-call fixed cost" in w for w in result.detail.warnings)
    else:
        assert fixed >= 0
    assert set(result.load_tokens_per_second) == {"1", "4"}
    assert result.quality is not None and result.quality.endswith("/6")
    assert result.weights_gib is not None and result.kv_cache_tokens is not None
    assert result.load_seconds is not None

    detail = result.detail
    assert detail is not None
    assert detail.decode is not None and detail.decode.valid
    assert len(detail.decode.records) == 2 * settings.decode_repeats
    assert detail.decode.engine_tokens_per_second is not None
    assert detail.decode.ttft_s is not None and detail.decode.inter_token_latency_s is not None
    assert detail.load is not None
    assert [level.concurrency for level in detail.load.levels] == [1, 4]
    for level in detail.load.levels:  # one batch each, plus any batch run again, which is said
        assert len(level.records) % level.concurrency == 0 and level.records
        assert len(level.records) == level.concurrency or level.measured_again
    assert detail.quality is not None
    assert all(item.reply for item in detail.quality.items)
    identity = detail.server_identity  # the same real server throughout, read at each boundary
    assert identity is not None and identity.changed is None
    assert identity.model == "smollm2-q4_1" and (identity.process or "").startswith("pid ")
    assert identity.checked == [
        "decode/parallel",
        "parallel: 1 at once",
        "parallel: 4 at once",
        "parallel/quality",
        "quality",
    ]
    assert detail.host is not None and [p.phase for p in detail.host.phases] == [
        "decode",
        "parallel",
        "quality",
    ]
    # How the questions were asked is recorded, down to the server's chat template.
    assert (detail.quality.temperature, detail.quality.seed) == (0.0, 0)
    assert detail.quality.chat_template_sha256 is not None
    # The client states its own share of what it timed (the engine runs in another process).
    decode_client = detail.decode.client
    assert decode_client is not None and decode_client.calls == 2 * settings.decode_repeats
    assert 0 < decode_client.share < 1
    assert decode_client.loop_share is not None and decode_client.loop_cpu_s is not None
    assert 0 < decode_client.loop_cpu_s <= decode_client.client_cpu_s  # one thread of the process
    assert all(level.client is not None for level in detail.load.levels)
    # Every speed figure carries its repeats' spread and an interval (2 repeats: the quick run).
    decode_summary = result.intervals["decode_tokens_per_second"]
    assert decode_summary.value == result.decode_tokens_per_second
    assert decode_summary.repeats == settings.decode_repeats
    assert decode_summary.ci95 is not None
    assert set(result.intervals) == {
        "decode_tokens_per_second",
        "load_c1_tokens_per_second",
        "load_c4_tokens_per_second",
    }
    env = detail.environment
    checkpoint = resolve_checkpoint("smollm2-q4_1")
    assert env.checkpoint_sha256 == hashlib.sha256(checkpoint.path.read_bytes()).hexdigest()
    assert env.engine_version is not None and env.engine_version.startswith("xllamacpp")
    assert env.backend == "local"
    assert env.started_utc <= (env.ended_utc or "")
    assert detail.startup is not None and detail.startup.quantization == "Q4_1"
    assert (tmp_path / "engine-smollm2-q4_1.log").is_file()
    assert not list(tmp_path.glob("*.part"))
