"""No traceback on any input: a file in the wrong encoding, binary garbage, or a server that sends
only headers or no HTTP at all is one line naming the file (or the address)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagemeter.errors import UserError
from tests.test_outputs import APP
from tests.wire import fixed_answer_server

NOTHING = "http://127.0.0.1:9"
LINE = '{"prompt": "What is 2+2?", "answer": "4"}\n'
CONTENTS = {
    "utf-16": (LINE.encode("utf-16"), "is UTF-16 text; save it as UTF-8"),
    "latin-1": ('{"prompt": "Grüße", "answer": "4"}\n'.encode("latin-1"), "is not UTF-8 text"),
    "binary": (bytes(range(128, 256)) * 4, "is not UTF-8 text (byte 0 is 0x80)"),
}
READERS = {
    "questions show": ["questions", "show", "{file}"],
    "measure --questions": ["measure", "{tmp}/m", NOTHING, "--questions", "{file}"],
    "combine": ["combine", "{tmp}/c.json", "{file}", "{file}"],
    "fidelity compare": ["fidelity", "compare", "{file}", "{file}"],
    "measure --fidelity-reference": [
        "measure",
        "{tmp}/m",
        NOTHING,
        "--fidelity-reference",
        "{file}",
    ],
}


@pytest.mark.parametrize("content", list(CONTENTS))
@pytest.mark.parametrize("reader", list(READERS))
def test_a_file_in_a_wrong_encoding_is_one_line(reader: str, content: str, tmp_path: Path) -> None:
    raw, expected = CONTENTS[content]
    path = tmp_path / "given.jsonl"
    path.write_bytes(raw)
    args = [arg.format(file=path, tmp=tmp_path) for arg in READERS[reader]]
    done = CliRunner().invoke(APP, args)
    assert isinstance(done.exception, UserError), done.output
    message = str(done.exception)
    assert message.startswith(str(path)) and expected in message
    assert "\n" not in message


ANSWERS = {
    "headers only": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n",
    "no HTTP": b"\x00\xffSSH-2.0-hello\r\n\r\n",
    "cut body": b'HTTP/1.1 200 OK\r\nContent-Length: 90\r\n\r\n{"data": [',
    "not JSON": b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n<html>\xff\xfe",
    "JSON, no models": b'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{"data": 7}\n',
    "closes at once": b"",
}


@pytest.fixture
def raw_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A loopback server that answers every connection with the same bytes, then closes."""
    with fixed_answer_server(ANSWERS[request.param]) as address:
        yield f"http://{address}"


@pytest.mark.parametrize("raw_server", list(ANSWERS), indirect=True)
def test_a_server_that_is_no_model_list_is_one_line_in_load(raw_server: str) -> None:
    done = CliRunner().invoke(APP, ["load", raw_server, "--duration", "1s", "-c", "1"])
    assert isinstance(done.exception, UserError), done.output
    message = str(done.exception)
    assert raw_server in message and "\n" not in message
