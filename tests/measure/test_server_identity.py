"""A server swapped for another model mid-measure is seen: `/v1/models` is read again at each
phase boundary, every reply's `model` is held to the first's, and the later phases are not run.

The known-truth server's `swap_model_after` fault is the swap: after N generation requests its
/v1/models and every reply name `truth-swapped` instead of `truth`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.engines.endpoints import process_of
from sagemeter.measure.decode import decode_request_count
from sagemeter.measure.identity import IdentityWatch, change_reason, identity_of
from sagemeter.measure.workflow import measure_target
from sagemeter.settings import MeasureSettings
from sagemeter.targets import parse_target
from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.openai import OpenAIChat

FAST = TruthTiming(ttft_s=0.01, itl_s=0.002)
PREFLIGHT = 2  # a whole and a streamed reply before anything is measured
SWAPPED = "the server's model changed from truth to truth-swapped"


def test_the_identity_is_the_first_id_and_a_digest_that_ignores_created() -> None:
    listed = {"data": [{"id": "m", "created": 1, "max_model_len": 4096}, {"id": "n"}]}
    again = {"data": [{"id": "m", "created": 99, "max_model_len": 4096}, {"id": "n"}]}
    first, second = identity_of(listed), identity_of(again)
    assert first is not None and first.model == "m" and first == second
    longer = identity_of({"data": [{"id": "m", "created": 1, "max_model_len": 8192}, {"id": "n"}]})
    assert longer is not None and longer.models_sha256 != first.models_sha256
    assert change_reason(first, second, "between the decode and parallel phases") is None
    assert change_reason(first, longer, "after the quality phase") == (
        "the server's model list changed after the quality phase (model m)"
    )
    assert change_reason(first, None, "x").startswith("the server's model list could not be read")
    assert identity_of({"object": "error"}) is None


def test_a_reply_from_another_model_fails_and_the_boundary_check_names_the_change() -> None:
    async def run(url: str) -> tuple[list[str | None], str | None, str | None]:
        watch = IdentityWatch(url)
        await watch.open()
        assert watch.first is not None and watch.first.model == "truth"
        same = await watch.check("decode", "parallel")
        async with OpenAIChat(url) as client:
            records = [
                await client.chat(ChatRequest(prompt="hi", max_tokens=2, stream=stream))
                for stream in (True, False, True)
            ]
        changed = await watch.check("parallel", "quality")
        return [r.error for r in records], same, changed

    with running_truth_server(FAST, faults=Faults(swap_model_after=1)) as url:
        errors, same, changed = asyncio.run(run(url))
    assert same is None
    assert errors[0] is None
    for error in errors[1:]:  # streamed and whole replies alike
        assert error == (
            "the reply came from model 'truth-swapped', not 'truth' as the first replies did "
            "(the server's model changed)"
        )
    assert changed == f"{SWAPPED} between the parallel and quality phases"


def small_settings() -> MeasureSettings:
    """A measure quick enough for a boundary test: two decode pairs, one level of 2, one
    question per family (the faces' tests use it too)."""
    return MeasureSettings(
        short_tokens=4,
        long_tokens=16,
        decode_repeats=2,
        prefill_tokens=[],
        load_levels=[2],
        load_max_tokens=8,
        load_batches=1,
        batch_reruns=0,
        questions_per_family=1,
        quality_max_tokens=8,
        timeout_s=5.0,
        stall_s=1.0,
        retries=1,
    )


def test_a_swap_during_the_parallel_phase_leaves_quality_unasked(tmp_path: Path) -> None:
    settings = small_settings()
    decode = decode_request_count(settings.decode_repeats, settings.decode_warmup)
    # The swap comes with the first request after decode: the parallel phase's first batch.
    faults = Faults(swap_model_after=PREFLIGHT + decode)
    with running_truth_server(FAST, faults=faults) as url:
        result, path = asyncio.run(
            measure_target(parse_target(url), name="swap", settings=settings, out_dir=tmp_path)
        )
    assert result.complete is False
    # Checked after the level itself: the change is placed in it, and the level dropped.
    reason = f"{SWAPPED} during or after 2 at once of the parallel phase"
    assert result.incomplete_because[0] == (
        f"server identity: {reason}; figures of parallel, 2 at once dropped; later phases not "
        "measured"
    )
    assert result.decode_tokens_per_second is not None  # measured before the swap: it stands
    assert result.load_tokens_per_second == {"2": None}  # never the new model's figure
    detail = result.detail
    assert detail is not None and detail.quality is not None and detail.load is not None
    records = [r for level in detail.load.levels for r in level.records]
    assert records and all("truth-swapped" in (r.error or "") for r in records)
    assert detail.quality.answered_count == 0
    assert all(item.error == f"not asked: {reason}" for item in detail.quality.items)
    identity = detail.server_identity
    assert identity is not None and identity.model == "truth" and identity.changed == reason
    assert identity.checked == ["decode/parallel", "parallel: 2 at once"]
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["detail"]["server_identity"]["changed"] == reason
    assert written["detail"]["host"]["cores"] >= 1


@pytest.mark.slow
def test_the_command_exits_3_when_the_model_changes_after_the_preflight(tmp_path: Path) -> None:
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home")}
    env.pop("OPENAI_API_KEY", None)
    with running_truth_server(FAST, faults=Faults(swap_model_after=PREFLIGHT)) as url:
        done = subprocess.run(
            [sys.executable, "-m", "sagemeter", "measure", str(tmp_path / "out"), url, "--quick"],
            capture_output=True,
            text=True,
            env=env,
        )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    reason = f"{SWAPPED} between the decode and parallel phases"
    assert reason in " ".join(done.stderr.split())
    written = json.loads(next((tmp_path / "out").glob("measure-*.json")).read_text())
    assert written["complete"] is False
    assert written["incomplete_because"][0].startswith(f"server identity: {reason}")
    assert written["decode_tokens_per_second"] is None  # every measured reply was the other's


class _Child:
    """A real child process, told as a server sagemeter started tells of its own."""

    def __init__(self) -> None:
        self.popen = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    @property
    def pid(self) -> int | None:
        return self.popen.pid

    def is_running(self) -> bool:
        return self.popen.poll() is None


def test_a_started_server_whose_process_ended_is_another_server() -> None:
    child = _Child()

    async def run(url: str) -> tuple[str | None, str | None]:
        watch = IdentityWatch(url, process=process_of(child))
        await watch.open()
        same = await watch.check("decode", "parallel")
        child.popen.kill()
        child.popen.wait()
        changed = await watch.check("parallel", "quality")
        record = watch.record()
        assert record is not None and record.process == f"pid {child.pid}"
        return same, changed

    try:
        with running_truth_server(FAST) as url:
            same, changed = asyncio.run(run(url))
    finally:
        child.popen.kill()
        child.popen.wait()
    assert same is None
    assert changed == (
        f"the server's process changed from pid {child.pid} to pid {child.pid}, ended "
        "between the parallel and quality phases"
    )


@pytest.mark.slow
async def test_the_mcp_measure_tool_answers_incomplete_with_the_change(tmp_path: Path) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import ok, text_of

    results = tmp_path / "results"
    with running_truth_server(FAST, faults=Faults(swap_model_after=PREFLIGHT)) as url:
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            answer = await client.call_tool("measure_endpoint", {"target": url, "quick": True})
    found = ok(answer)
    reason = f"{SWAPPED} between the decode and parallel phases"
    assert found["complete"] is False
    assert found["incomplete_because"][0].startswith(f"server identity: {reason}")
    assert f"INCOMPLETE: server identity: {reason}" in text_of(answer)


@pytest.mark.slow  # two command starts
def test_calibrate_server_swaps_its_model_after_n_generations(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    import httpx

    port_file = tmp_path / "port"
    command = [sys.executable, "-m", "sagemeter", "calibrate-server", "--ttft", "1ms"]
    command += ["--itl", "1ms", "--swap-model-after", "1", "--port-file", str(port_file)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sagemeter_env
    )
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        with httpx.Client(base_url=f"http://127.0.0.1:{port_file.read_text().strip()}") as web:
            listed = [web.get("/v1/models").json()["data"][0]["id"]]
            replies = [web.post("/v1/chat/completions", json=body).json()["model"]]
            listed.append(web.get("/v1/models").json()["data"][0]["id"])  # one generation: same
            replies.append(web.post("/v1/chat/completions", json=body).json()["model"])
            listed.append(web.get("/v1/models").json()["data"][0]["id"])
    finally:
        process.kill()
        process.communicate()
    assert listed == ["truth", "truth", "truth-swapped"]
    assert replies == ["truth", "truth-swapped"]
    refused = subprocess.run(
        [sys.executable, "-m", "sagemeter", "calibrate-server", "--swap-model-after", "-1"],
        capture_output=True,
        text=True,
        env=sagemeter_env,
        timeout=60,
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "swap_model_after must be 0 or more" in refused.stderr


def test_vllms_fresh_permission_ids_are_no_change_but_another_context_is() -> None:
    """vLLM gives every /v1/models answer a new `modelperm-…` id and `created`: the same server."""

    def answer(perm: str, created: int, max_model_len: int = 2048) -> dict[str, object]:
        permission = [{"id": f"modelperm-{perm}", "created": created, "allow_sampling": True}]
        entry = {"id": "m", "created": created, "root": "/m", "max_model_len": max_model_len}
        return {"object": "list", "data": [{**entry, "permission": permission}]}

    first, again = identity_of(answer("a1", 1)), identity_of(answer("b2", 2))
    assert first is not None and again is not None and first == again
    assert identity_of(answer("c3", 3, max_model_len=4096)) != first


def test_a_busy_model_list_is_no_change_but_a_gone_server_is() -> None:
    """A server still there that answers `/v1/models` with 503 (or times out) after a heavy
    level is no sign of another server: that boundary is named unchecked and the watch goes
    on; the next reading of the same list is still the same server."""
    from tests.wire import WireServer, json_response

    status = {"now": 200}

    async def models(writer, body):  # type: ignore[no-untyped-def]
        status_now = status["now"]
        payload = {"object": "list", "data": [{"id": "m", "object": "model"}]}
        writer.write(json_response(status_now, payload if status_now == 200 else {"error": "busy"}))

    async def run(url: str) -> tuple[str | None, str | None, list[str]]:
        watch = IdentityWatch(url)
        await watch.open()
        assert watch.first is not None and watch.first.model == "m"
        status["now"] = 503  # every try, the retries' too
        busy = await watch.check("decode", "parallel")
        status["now"] = 200
        again = await watch.check("parallel", "quality")
        return busy, again, watch.checked

    with WireServer({"/v1/models": models}) as server:
        busy, again, checked = asyncio.run(run(server.url))
    assert busy is None and again is None
    assert checked == [
        "decode/parallel (not read: /v1/models answered HTTP 503)",
        "parallel/quality",
    ]
    assert change_reason(identity_of({"data": [{"id": "m"}]}), None, "here") == (  # type: ignore[arg-type]
        "the server's model list could not be read again here"
    )  # no answer at all (refused, reset): the server is gone, and that is a change
