"""Nothing leaked: a secret is masked in every form it may come back in, a key that would inject a
header is refused, and control characters from files and servers never reach a terminal raw."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagemeter.atomic import write_json_atomic
from sagemeter.errors import UserError
from sagemeter.printable import printable
from sagemeter.redaction import MASK, redact, register_secret
from tests import cli_run
from tests.test_outputs import APP
from tests.wire import WireServer, json_response

NOTHING = "http://127.0.0.1:9"
# A key a JSON encoder escapes (`"`, `\`), a URL encoder changes (`/`, `+`, space) and a
# credential shape does not cover (no `sk-` prefix).
QUOTED = 'kq"ey\\with/odd+chars and-0123456789'


def _pieces(key: str) -> list[str]:
    """Parts of `key` long enough to be telling: a half-masked key is a leak."""
    return [key[:8], key[-10:], key[len(key) // 3 : len(key) // 3 + 8]]


@pytest.mark.parametrize(
    "encode",
    [
        lambda k: k,
        lambda k: json.dumps({"echo": f"Authorization: Bearer {k}"}),
        lambda k: json.dumps(json.dumps({"error": f"Bearer {k}"})),  # a body quoted in a file
        lambda k: json.dumps(k, ensure_ascii=True),
        lambda k: "GET /v1/models?key=" + urllib.parse.quote(k, safe=""),
        lambda k: "key=" + urllib.parse.quote_plus(k),
    ],
    ids=["raw", "json", "json-twice", "json-ascii", "url", "url-plus"],
)
def test_a_known_secret_is_masked_in_every_encoding(encode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    register_secret(QUOTED)
    text = redact(encode(QUOTED))
    assert MASK in text
    assert not any(piece in text for piece in _pieces(QUOTED)), text


def test_a_result_file_never_holds_an_echoed_key_with_a_quote(tmp_path: Path) -> None:
    register_secret(QUOTED)
    path = tmp_path / "result.json"
    write_json_atomic(path, {"warnings": [f"HTTP 401: Authorization: Bearer {QUOTED}"]})
    written = path.read_text(encoding="utf-8")
    assert not any(piece in written for piece in _pieces(json.dumps(QUOTED)[1:-1])), written
    assert json.loads(written)["warnings"][0].startswith("HTTP 401")


def _sagemeter(
    *args: str, home: Path, real_process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`sagemeter ARGS` in this process, or as its own process: what reaches the terminal, the
    load workers' output included, shows whole only there."""
    env = {**os.environ, "SAGEMETER_HOME": str(home), "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    return (cli_run.run if real_process else cli_run.invoke)(args, env)


@pytest.mark.parametrize("command", ["load", "measure"])
@pytest.mark.parametrize("bad", ["\r\nX-Injected: 1", "\n", "\t", "\x1b[2J"])
def test_a_key_that_would_inject_a_header_is_refused(
    command: str, bad: str, tmp_path: Path
) -> None:
    key = f"sk-looks-fine-0123{bad}456789"
    args = ["load", NOTHING] if command == "load" else ["measure", str(tmp_path / "m"), NOTHING]
    done = CliRunner().invoke(APP, [*args, "--api-key", key])
    assert isinstance(done.exception, UserError), done.output
    assert "holds a control character" in str(done.exception)
    assert "0123" not in str(done.exception) + done.output  # the value is never shown
    assert not (tmp_path / "m").exists()


def test_the_refusal_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _sagemeter("load", NOTHING, "--api-key", "sk-0123456\r\nX-Injected: 1", home=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds a control character" in lines[0]
    assert "0123" not in done.stderr + done.stdout


async def _echo_401(writer, body):  # type: ignore[no-untyped-def]
    auth = body["_headers"].get("authorization")
    writer.write(json_response(401, {"error": {"message": f"bad key: Authorization: {auth}"}}))


def test_an_echoed_key_holding_a_quote_reaches_no_terminal(tmp_path: Path) -> None:
    with WireServer({"/v1/chat/completions": _echo_401}) as server:
        done = _sagemeter(
            "load", server.url, "--model", "m", "--api-key", QUOTED, "-c", "1",
            "--duration", "1s", "--out", str(tmp_path / "load.json"), home=tmp_path / "home",
            real_process=True,
        )  # fmt: skip
    shown = done.stdout + done.stderr
    assert "HTTP 401" in shown and MASK in shown
    assert not any(piece in shown for piece in _pieces(QUOTED)), shown
    assert (tmp_path / "load.json").is_file()  # the echoed errors are in it: checked below
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert not any(p in path.read_text(errors="replace") for p in _pieces(QUOTED))


def test_escapes_from_a_question_file_are_shown_escaped(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    prompt = "Hi\x1b]0;owned\x07 there\x1b[2J\rgone\x9b31m"
    path.write_text(json.dumps({"prompt": prompt, "answer": "4"}) + "\n", encoding="utf-8")
    done = CliRunner().invoke(APP, ["questions", "show", str(path), "--limit", "0"])
    assert done.exit_code == 0, done.output
    assert "\x1b" not in done.output and "\x9b" not in done.output and "\r" not in done.output
    assert "\\x1b]0;owned" in done.output


def test_an_error_line_quoting_a_name_with_escapes_stays_inert(tmp_path: Path) -> None:
    done = _sagemeter("load", NOTHING, "--out", "/proc/\x1b[2Jx/out.json", home=tmp_path)
    assert done.returncode == 2
    assert "\x1b" not in done.stderr and "\\x1b[2Jx" in done.stderr


def test_printable_keeps_text_and_escapes_controls() -> None:
    assert printable("tab\tand ünïcode") == "tab\tand ünïcode"
    assert printable("a\nb\x1bc\x7f\x9b") == "a\\nb\\x1bc\\x7f\\x9b"
    assert printable("a\nb\r", keep_newlines=True) == "a\nb\\r"
