"""`measure NAME@REGION` of an endpoint whose connections drop mid-reply (a network, a container
that crashed): every cut request is one failed record with its one-line reason, no figure comes
from a cut reply, and the command ends as it does for failed requests (incomplete, exit 3),
never with a traceback. Real boto3 against the loopback runtime, in front of the known-truth
server (milliseconds a reply; the engine behind the runtime is tested in
test_sagemaker_measure.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.errors import EXIT_INCOMPLETE
from tests.cli_run import invoke
from tests.sagemaker_fakes import RuntimeFake, World, plain_endpoint

NAME = "cut-endpoint"


@pytest.fixture(scope="module")
def runtime_fake() -> Iterator[RuntimeFake]:
    """The runtime in front of the truth server (replaces the session's engine-backed one)."""
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.002)) as url:
        fake = RuntimeFake(url + "/v1")
        yield fake
        fake.close()


def _records(value: Any) -> Iterator[dict[str, Any]]:
    """Every request record anywhere in a result's detail (a dict with `send_us` and `error`)."""
    if isinstance(value, dict):
        if "send_us" in value and "error" in value:
            yield value
        for each in value.values():
            yield from _records(each)
    elif isinstance(value, list):
        for each in value:
            yield from _records(each)


def test_measure_of_an_endpoint_that_cuts_its_replies_records_failures_and_exits_3(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    plain_endpoint(NAME, "us-east-2")
    runtime.behaviour[NAME] = "cut-mid-reply"
    runtime.cut_after_parts = 5  # streams: headers and five event-stream parts; whole: half
    runtime.spared = 1  # the preflight's reply is whole: what is measured after it is cut
    out = tmp_path / "out"
    done = invoke(["measure", out, f"{NAME}@us-east-2", "--quick"])
    said = done.stdout + done.stderr
    assert done.returncode == EXIT_INCOMPLETE, said
    assert "Traceback" not in said
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("incomplete: decode rate: no decode rate"), last
    assert "connection lost mid-reply: ProtocolError: Response ended prematurely" in last

    [path] = out.glob("measure-*.json")
    result = json.loads(path.read_text())
    assert result["complete"] is False  # no figure from a cut reply
    assert result["decode_tokens_per_second"] is None and result["ttft_median_ms"] is None
    assert result["load_tokens_per_second"] == {"1": None, "4": None}
    assert result["quality"] == "0/0"
    detail = result["detail"]
    records = list(_records({k: v for k, v in detail.items() if k != "quality"}))
    items = detail["quality"]["items"]
    assert records and all(record["error"] for record in records)
    for record in records:  # each cut stream: one line saying so, and never sent again
        assert (
            record["error"]
            == "connection lost mid-reply: ProtocolError: Response ended prematurely"
            and not record["attempts"]
        )
    for item in items:  # the questions go as whole replies, cut half-way through the body
        assert (
            item["error"].startswith(
                "connection lost mid-reply: ProtocolError: Connection broken: IncompleteRead("
            )
            and not item["retries"]
        )
    failed = len(records) + len(items)
    assert detail["failed_requests"] == failed and detail["retries"] == 0
    assert f"{failed} requests failed: {failed} failed otherwise" in " ".join(detail["warnings"])
    # Each failed request reached the endpoint once, besides the preflight and the decode warm-up.
    assert len(runtime.requests) == failed + 2
