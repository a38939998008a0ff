"""No credential leaves the process, even when a server echoes it back.

Some OpenAI-style proxies answer 401 with a body that quotes the request's Authorization header.
The key must then appear nowhere: not on the terminal, not in any file written, not in an MCP
answer; and `load` must not hammer a server that refuses everything.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagemeter.redaction import MASK, StreamRedaction, redact, register_secret
from tests.wire import WireServer, json_response

KEY = "sk-test-0123456789abcdefghij"
CHAT = "/v1/chat/completions"


async def _echo_401(writer, body):  # type: ignore[no-untyped-def]
    headers = body["_headers"]
    writer.write(
        json_response(
            401,
            {
                "error": {
                    "message": f"invalid credentials: Authorization: {headers.get('authorization')}",
                    "received_headers": headers,
                }
            },
        )
    )


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAGEMETER_HOME": str(home), "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args], capture_output=True, text=True, env=env,
        timeout=300, check=False,
    )  # fmt: skip


def _nothing_leaked(done: subprocess.CompletedProcess[str], folder: Path) -> None:
    assert KEY not in done.stdout and KEY not in done.stderr
    assert KEY[:12] not in done.stdout + done.stderr  # not even a prefix
    for path in folder.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


@pytest.mark.slow
def test_an_echoed_key_is_masked_and_a_refusing_server_is_not_hammered(tmp_path: Path) -> None:
    with WireServer({CHAT: _echo_401}) as server:
        load = _run(
            ["load", server.url, "--model", "m", "--api-key", KEY, "-c", "8", "--duration", "20s",
             "--out", str(tmp_path / "load.json")],
            tmp_path / "home",
        )  # fmt: skip
        sent_by_load = sum(1 for request in server.requests if request["path"] == CHAT)
        measure = _run(
            ["measure", str(tmp_path / "m"), server.url, "--quick", "--api-key", KEY],
            tmp_path / "home",
        )
    assert load.returncode == 2, load.stderr
    assert "stopped sending rather than hammer a failing server" in load.stderr
    assert "HTTP 401" in load.stderr and MASK in load.stderr
    # Every stream backs off after each failure and each worker stops after 32 in a row (the
    # identity reads of /v1/models before and after the run are not chat requests).
    assert sent_by_load <= 32 * os.cpu_count()  # type: ignore[operator]
    assert not (tmp_path / "load.json").exists()
    assert measure.returncode == 2 and "HTTP 401" in measure.stderr
    _nothing_leaked(load, tmp_path)
    _nothing_leaked(measure, tmp_path)


def test_shapes_and_known_values_are_masked() -> None:
    register_secret("a-secret-value-123")
    text = (
        'Authorization: Bearer abcdef123456 {"x-api-key": "zzzzzzzz"} AKIAABCDEFGHIJKLMNOP '
        "hf_abcdefghijklmnopqrstuvwxyz sk-abcdefghijklmnopqrst a-secret-value-123 plain words"
    )
    masked = redact(text)
    for secret in ("abcdef123456", "zzzzzzzz", "AKIAABCDEFGHIJKLMNOP", "hf_abcdefghij",
                   "sk-abcdefghij", "a-secret-value-123"):  # fmt: skip
        assert secret not in masked
    assert "plain words" in masked and masked.count(MASK) >= 6
    assert json.loads(json.dumps(redact("SM_VLLM_MAX_NUM_BATCHED_TOKENS=8192"))) == (
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS=8192"
    )


@pytest.mark.parametrize("cuts", [[5], [2, 9], [1, 2, 3, 4, 5, 6, 7, 8], [27]])
def test_a_secret_split_across_streamed_pieces_is_never_shown(cuts: list[int]) -> None:
    """Text shown piece by piece (a streamed reply): a known key and a credential shape, each
    cut across pieces at every place, reach the screen masked, and the rest of the text whole."""
    known = "Known-Split-Value-4242"
    register_secret(known)
    for secret in (known, "sk-abcdefghijklmnopqrstuvwx", "hf_ABCDEFGHIJKLMNOPQRST"):
        text = f"before {secret} after; then Bearer {secret[::-1]}x and {secret}"
        offset = text.index(secret)  # the cuts fall inside the first copy of the secret
        bounds = [0, *(offset + c for c in cuts if c < len(secret)), len(text)]
        shown: list[str] = []
        stream = StreamRedaction(shown.append)
        for low, high in itertools.pairwise(bounds):
            stream.feed(text[low:high])
        stream.close()
        joined = "".join(shown)
        assert secret not in joined and secret[::-1] not in joined, joined
        assert all(secret not in piece for piece in shown)
        assert joined.startswith("before ***") and joined.endswith("and ***"), joined
        assert joined == redact(text)
