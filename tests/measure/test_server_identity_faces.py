"""The server-identity rule on every face: `measure` (a restart as well as a swap), `load` (one
run, a sweep, a search), an experiment arm and the MCP operating-point tool.

A swapped server is the known-truth server's `swap_model_after` fault (/v1/models and every
reply then name `truth-swapped`); a restarted one its `restart_after` fault (the same model, but
/metrics shows a later process start and a counter begun again); a restart seen only by a
counter going back is a tiny wire-level server of this file. Each case asserts `complete: false`
(or `valid: false` for load), the reason naming before → after, the exit code, and that no
figure holds both servers' replies.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.measure.identity import IdentityWatch, restart_reason
from sagemeter.measure.workflow import measure_target
from sagemeter.targets import parse_target
from tests.measure.test_server_identity import small_settings

FAST = TruthTiming(ttft_s=0.005, itl_s=0.001)
PREFLIGHT = 2  # a whole and a streamed reply before anything is measured
SWAPPED = "the server's model changed from truth to truth-swapped"
RESTARTED = "the server restarted: its process start time moved from "


def _app() -> typer.Typer:
    """`sagemeter load` in this process."""
    from sagemeter.cli.load import register

    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """sagemeter"""

    register(app)
    return app


# -- restarts seen by /metrics --------------------------------------------------------------


class _CountingServer(BaseHTTPRequestHandler):
    """/v1/models always the same; /metrics a counter that the test sets (no start time)."""

    count = 10.0

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": "m", "created": 1}]})
            kind = "application/json"
        elif self.path == "/metrics":
            body = f"# TYPE m_requests counter\nm_requests_total {self.count}\n"
            kind = "text/plain"
        else:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        """Quiet."""


@pytest.fixture
def counting_server() -> Iterator[tuple[str, type[_CountingServer]]]:
    handler = type("Handler", (_CountingServer,), {"count": 10.0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.02,), daemon=True
    )  # quick shutdown
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_counter_gone_back_is_a_restart_and_a_growing_one_is_not(
    counting_server: tuple[str, type[_CountingServer]],
) -> None:
    url, handler = counting_server
    watch = IdentityWatch(url)
    watch.open_blocking()
    assert watch.first is not None and watch.first.started is None  # no start time given
    handler.count = 25.0
    assert watch.check_blocking("decode/parallel", "between the decode and parallel phases") is None
    handler.count = 3.0  # below the last reading (25), though the model list is the same
    changed = watch.check_blocking("parallel/quality", "between the parallel and quality phases")
    assert changed == (
        "the server restarted: its /metrics counter m_requests_total went back from 25 to 3 "
        "between the parallel and quality phases"
    )
    record = watch.record()
    assert record is not None and record.checked == ["decode/parallel", "parallel/quality"]
    assert restart_reason({}, {"x_total": 1.0}, "here") is None  # nothing to compare with


# -- measure -----------------------------------------------------------------------------------


def test_measure_drops_the_phase_a_restart_fell_in_and_runs_none_after(tmp_path: Path) -> None:
    # The restart comes with decode's second request: its replies are two processes'.
    with running_truth_server(FAST, faults=Faults(restart_after=PREFLIGHT + 1)) as url:
        result, path = asyncio.run(
            measure_target(parse_target(url), name="r", settings=small_settings(), out_dir=tmp_path)
        )
    assert result.complete is False
    first = result.incomplete_because[0]
    assert first.startswith(f"server identity: {RESTARTED}")
    assert first.endswith(
        "between the decode and parallel phases (/metrics process_start_time_seconds); figures "
        "of the decode phase dropped; later phases not measured"
    )
    # No figure mixes the two processes: decode's are dropped, nothing after it was measured.
    assert result.decode_tokens_per_second is None and result.ttft_median_ms is None
    assert result.inter_token_latency_median_ms is None
    assert result.load_tokens_per_second == {"2": None}
    detail = result.detail
    assert detail is not None and detail.decode is not None and detail.quality is not None
    assert detail.decode.records  # the evidence stays
    assert detail.decode.problems[0].startswith("dropped: measured across a change of server")
    assert detail.quality.answered_count == 0
    identity = detail.server_identity
    assert identity is not None and identity.process_start_time_s is not None
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["complete"] is False and written["decode_tokens_per_second"] is None


# -- load ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("faults", "mode", "reason"),
    [
        (Faults(swap_model_after=6), [], SWAPPED + " during or after the 2 at once run"),
        (Faults(restart_after=1), ["--sweep"], RESTARTED),
        (
            Faults(swap_model_after=1),
            ["--search", "concurrency", "--slo-ttft", "1s", "--slo-percentile", "50"],
            SWAPPED + " during or after the 1 at once run",
        ),
    ],
    ids=["one run, swapped", "sweep, restarted", "search, swapped"],
)
def test_load_is_invalid_with_the_change_and_exits_3(
    tmp_path: Path, faults: Faults, mode: list[str], reason: str
) -> None:
    out = tmp_path / "load.json"
    with running_truth_server(FAST, faults=faults) as url:
        args = ["load", url, "-c", "2", "--max-tokens", "4", "--duration", "0.3s", "--workers", "1"]
        done = CliRunner().invoke(_app(), [*args, *mode, "--out", str(out)])
    assert done.exit_code == 3, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
    assert "incomplete: server identity: " in " ".join(done.output.split())
    written = json.loads(out.read_text())
    assert written["valid"] is False
    assert written["invalid_because"][0].startswith(f"server identity: {reason}")
    identity = written["server_identity"]
    assert identity["model"] == "truth" and identity["changed"].startswith(reason)
    if "--sweep" in mode:  # the level it fell in is the last, and invalid
        assert [level["valid"] for level in written["levels"]] == [False]
        assert written["knee"]["reason"].startswith(f"the sweep stopped at 1 at once: {reason}")
    elif "--search" in mode:
        assert written["slo_search"]["reason"].startswith(f"the search stopped: {reason}")
        assert written["operating_point"] is None
    else:  # no completed request is the other model's: those replies are failures
        assert written["requests_completed"] > 0 and written["requests_failed"] > 0
        assert any("truth-swapped" in problem for problem in written["problems"][1:])


def test_load_on_the_same_server_stays_valid_with_its_identity(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    with running_truth_server(FAST) as url:
        args = ["load", url, "-c", "2", "--max-tokens", "4", "--duration", "0.3s", "--workers", "1"]
        done = CliRunner().invoke(_app(), [*args, "--out", str(out)])
    written = json.loads(out.read_text())
    assert written["server_identity"]["changed"] is None, done.output
    assert written["server_identity"]["checked"] == ["2 at once"]
    assert not any(p.startswith("server identity") for p in written["invalid_because"])


# -- MCP -------------------------------------------------------------------------------------


async def test_the_mcp_operating_point_tool_stops_at_a_swap(tmp_path: Path) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server

    results = tmp_path / "results"
    arguments = {"name": "swap", "slo_ttft_ms": 1000, "percentile": 50, "max_tokens": 4}
    arguments |= {"max_concurrency": 2, "min_probe_s": 0.3}
    with running_truth_server(FAST, faults=Faults(swap_model_after=1)) as url:
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            answer = await client.call_tool("find_operating_point", {"target": url, **arguments})
    found = answer.structured_content
    assert found is not None and found["found"] is False
    reason = f"{SWAPPED} during or after the 1 at once run"
    assert found["reason"] == f"the search stopped: {reason}"
    written = json.loads((results / "load-swap.json").read_text())
    assert written["valid"] is False and written["server_identity"]["changed"] == reason


# -- an experiment arm -------------------------------------------------------------------------


@pytest.mark.slow  # a whole two-arm plan: about 3 CPU-s
def test_a_plan_arm_whose_server_is_swapped_ends_incomplete_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sagemeter.cli.run import register
    from tests.experiment.test_experiment_local import SHORT

    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """sagemeter"""

    register(app)
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    with (
        running_truth_server(FAST) as good,
        running_truth_server(FAST, faults=Faults(swap_model_after=PREFLIGHT)) as swapped,
    ):
        arms = f'[[arm]]\nname = "a"\ntarget = "{good}"\n\n[[arm]]\nname = "b"\n'
        (tmp_path / "plan.toml").write_text(f'name = "swap"\n{SHORT}\n{arms}target = "{swapped}"\n')
        done = CliRunner().invoke(app, ["run", "plan.toml", "--out", "run"])
    assert done.exit_code == 3, done.output
    run = tmp_path / "run"
    reason = f"server identity: {SWAPPED} between the decode and parallel phases"
    b = json.loads((run / "measure-b.json").read_text())
    assert b["complete"] is False and b["incomplete_because"][0].startswith(reason)
    assert b["decode_tokens_per_second"] is None and set(b["load_tokens_per_second"].values()) == {
        None
    }
    assert b["detail"]["server_identity"]["model"] == "truth"
    a = json.loads((run / "measure-a.json").read_text())
    assert a["complete"] is True and a["detail"]["server_identity"]["changed"] is None
    journal = json.loads((run / "journal.json").read_text())
    assert [line.split(":")[0] for line in journal["incomplete"]] == ["b"]


# -- a SageMaker endpoint: the replies' model ----------------------------------------------------


async def test_a_sagemaker_reply_from_another_model_is_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SageMaker has no /v1/models to read between phases; each reply's `model` is still held to
    the first reply's (the runtime fake forwards to a known-truth server that swaps)."""
    from sagemeter.transport.chat import ChatRequest
    from sagemeter.transport.retry import NO_RETRIES
    from sagemeter.transport.sagemaker import SageMakerRuntimeClient
    from tests.sagemaker_fakes import RuntimeFake

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing-secret",
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    with running_truth_server(FAST, faults=Faults(swap_model_after=1)) as url:
        fake = RuntimeFake(f"{url}/v1")
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", fake.url)
        try:
            async with SageMakerRuntimeClient(
                "e", "us-east-2", model="truth", retry=NO_RETRIES
            ) as client:
                records = [
                    await client.chat(ChatRequest(prompt="hi", max_tokens=2, stream=stream))
                    for stream in (True, False, True)
                ]
        finally:
            fake.close()
    assert records[0].ok, records[0].error
    for record in records[1:]:  # streamed and whole replies alike: failures, never figures
        assert not record.ok
        assert record.error == (
            "the reply came from model 'truth-swapped', not 'truth' as the first replies did "
            "(the server's model changed)"
        )


def test_a_restart_between_parallel_levels_keeps_the_levels_before_it(tmp_path: Path) -> None:
    from sagemeter.measure.decode import decode_request_count

    settings = small_settings().model_copy(update={"load_levels": [1, 2]})
    decode = decode_request_count(settings.decode_repeats, settings.decode_warmup)
    # The restart comes with the first request after 1 at once's one batch (with 2 at once's
    # first, unless 1 at once is run again: then with that, and 1 at once is the level dropped).
    faults = Faults(restart_after=PREFLIGHT + decode + 1)
    with running_truth_server(FAST, faults=faults) as url:
        result, _ = asyncio.run(
            measure_target(parse_target(url), name="r", settings=settings, out_dir=tmp_path)
        )
    detail = result.detail
    assert detail is not None and detail.load is not None
    identity = detail.server_identity
    assert identity is not None and identity.changed is not None
    assert identity.changed.startswith(RESTARTED)
    spanned = identity.checked[-1]
    assert spanned in ("parallel: 1 at once", "parallel: 2 at once")
    level = int(spanned.split(": ")[1].split()[0])
    assert result.incomplete_because[0].endswith(
        f"during or after {level} at once of the parallel phase (/metrics "
        f"process_start_time_seconds); figures of parallel, {level} at once dropped; later "
        "phases not measured"
    )
    assert result.decode_tokens_per_second is not None  # checked after decode: the first server
    by_level = {lv.concurrency: lv for lv in detail.load.levels}
    assert by_level[level].tokens_per_second is None and by_level[level].records
    assert str(by_level[level].problem).startswith("dropped: measured across a change of server")
    if level == 2:  # the level before the change keeps its figure
        assert by_level[1].tokens_per_second is not None, by_level[1].problem
    else:
        assert by_level[2].problem == f"not measured: {identity.changed}"
    assert detail.quality is not None and detail.quality.answered_count == 0


def test_a_sequential_look_is_not_taken_on_a_swapped_arms_answers(tmp_path: Path) -> None:
    """`[stop] quality = "decided"`: both arms share the looks; arm b's server is swapped during
    its questions, so b stops before the look (its quality dropped) and a goes on without looks:
    no verdict is drawn from two servers' answers."""
    from sagemeter.experiment.quality_stop import QualityStop
    from sagemeter.measure.decode import decode_request_count
    from sagemeter.measure.workflow import selected_questions

    settings = small_settings().model_copy(update={"load_levels": [1], "margin_points": 10.0})
    count = len(selected_questions(settings).questions)
    stop = QualityStop("a", "b", count, 2, settings.margin_points)
    decode = decode_request_count(settings.decode_repeats, settings.decode_warmup)
    # b's server is another model from its second question on (1 at once: one request).
    faults = Faults(swap_model_after=PREFLIGHT + decode + 1 + 1)

    async def arm(url: str, name: str) -> Any:
        try:
            out = tmp_path / name
            target = parse_target(url)
            return await measure_target(
                target, name=name, settings=settings, out_dir=out, quality_looks=stop.arm(name)
            )
        finally:
            await stop.leave(name)

    async def both(good: str, swapped: str) -> list[Any]:
        return list(await asyncio.gather(arm(good, "a"), arm(swapped, "b")))

    with (
        running_truth_server(FAST) as good,
        running_truth_server(FAST, faults=faults) as swapped,
    ):
        (a, _), (b, _) = asyncio.run(both(good, swapped))
    assert b.complete is False
    assert b.incomplete_because[0] == (
        f"server identity: {SWAPPED} before the sequential look at 2 answers of the quality "
        "phase; figures of the quality phase dropped; later phases not measured"
    )
    assert b.detail.quality.answered_count == 0  # no answer of b counts
    # Checked after it: the first server's.
    first_level = next(level for level in b.detail.load.levels if level.concurrency == 1)
    assert b.load_tokens_per_second["1"] is not None, first_level.problem
    sequential = a.detail.quality.sequential
    assert sequential is None or sequential.verdict == "INCONCLUSIVE"
    if sequential is not None:
        assert "arm 'b' ended before the verdict" in sequential.stopping_reason
    assert a.detail.quality.answered_count == count  # a asked every question, without looks


def test_a_sagemaker_endpoint_created_again_with_another_model_is_another_server(
    world: Any,
) -> None:
    """SageMaker's identity is read from the control plane (moto here): the endpoint's config,
    its variants' models, its creation time. A redeploy under the same name is a change."""
    import boto3

    from sagemeter.measure.identity import sagemaker_identity
    from tests.sagemaker_fakes import plain_endpoint

    plain_endpoint("ident", "us-east-2")
    watch = IdentityWatch(None, reader=sagemaker_identity("ident", "us-east-2"))
    watch.open_blocking()
    assert watch.first is not None and watch.first.model == "ident"
    assert watch.first.started is not None
    assert watch.check_blocking("decode/parallel", "between the decode and parallel phases") is None
    client = boto3.client("sagemaker", region_name="us-east-2")
    client.delete_endpoint(EndpointName="ident")
    client.create_model(
        ModelName="other",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
        PrimaryContainer={"Image": "x"},
    )
    variant = {"VariantName": "v", "ModelName": "other", "InstanceType": "ml.g6.xlarge"}
    client.create_endpoint_config(
        EndpointConfigName="other", ProductionVariants=[{**variant, "InitialInstanceCount": 1}]
    )
    client.create_endpoint(EndpointName="ident", EndpointConfigName="other")
    changed = watch.check_blocking("parallel/quality", "between the parallel and quality phases")
    assert changed == (
        "the server's model changed from ident to other between the parallel and quality phases"
    )
    again = IdentityWatch(None, reader=sagemaker_identity("ident", "us-east-2"))
    again.open_blocking()
    client.delete_endpoint(EndpointName="ident")  # the same config, created again: a restart
    client.create_endpoint(EndpointName="ident", EndpointConfigName="other")
    restarted = again.check_blocking("decode/parallel", "between the decode and parallel phases")
    assert str(restarted).startswith("the server restarted: its creation time moved from ")
    assert str(restarted).endswith(
        "between the decode and parallel phases (DescribeEndpoint CreationTime)"
    )
    gone = IdentityWatch(None, reader=sagemaker_identity("no-such-endpoint", "us-east-2"))
    gone.open_blocking()
    assert gone.first is None and gone.record() is None  # nothing read: nothing claimed
