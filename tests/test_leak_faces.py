"""A server that echoes the API key back (JSON-escaped, URL-encoded, HTML-escaped, with its
spaces collapsed, cut in half at the client's cap) never gets it onto a terminal or into a file,
whichever command sent it: `load` (whose worker processes cut the errors to a line), `measure`
and `run` (the key from OPENAI_API_KEY). A key that would inject a header is refused on every
face before any work, and so is a target that would break the request line."""

from __future__ import annotations

import html
import json
import os
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from tests import cli_run
from tests.wire import WireServer, json_response

# `"` and `\` are escaped by JSON, `/`, `+` and spaces changed by URL encoding, `"` by HTML;
# the two spaces are one once a line's whitespace is collapsed. No credential shape covers it.
KEY = 'kq"ey\\with/odd+chars  and-0123456789'
TELLING = ['kq"ey', 'kq\\"ey', "kq%22ey", "kq&quot;ey", "odd+chars", "odd%2Bchars", "and-01234"]
CAP = 2048  # the client keeps this much of an error body (transport/http1.py)


def _body(kind: str, auth: str) -> bytes:
    if kind == "json":
        return json_response(401, {"error": {"message": f"bad key: Authorization: {auth}"}})
    if kind == "html":
        key = auth.removeprefix("Bearer ")
        page = (
            f"<html><body><p>denied: key={urllib.parse.quote_plus(key)} and "
            f"{html.escape(key)}</p></body></html>"
        ).encode()
        head = "HTTP/1.1 401 X\r\ncontent-type: text/html\r\ncontent-length: %d\r\n\r\n"
        return (head % len(page)).encode() + page
    # "cut": spaces (collapsed to one when shown), then the key across the kept length
    padding = " " * (CAP - len("Bearer ") - 12)
    text = (padding + auth).encode()
    head = "HTTP/1.1 401 X\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n"
    return (head % len(text)).encode() + text


def _server(kind: str) -> WireServer:
    async def echo(writer, body):  # type: ignore[no-untyped-def]
        writer.write(_body(kind, str(body["_headers"].get("authorization"))))

    async def models(writer, body):  # type: ignore[no-untyped-def]
        writer.write(json_response(200, {"object": "list", "data": [{"id": "m"}]}))

    return WireServer({"/v1/chat/completions": echo, "/v1/models": models})


def _sagemeter(
    args: list[str], home: Path, *, real_process: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    """`sagemeter ARGS` in this process, or as its own process: a key echoed back must reach
    no terminal, which only a real process's stdout and stderr show whole (its children's too)."""
    environ = {**os.environ, "SAGEMETER_HOME": str(home), "COLUMNS": "300", **env}
    return (cli_run.run if real_process else cli_run.invoke)(args, environ)


def _plan(folder: Path, url: str) -> Path:
    arms = "".join(f'[[arm]]\nname = "{n}"\ntarget = "{url}"\n' for n in ("a", "b"))
    path = folder / "plan.toml"
    path.write_text(f'name = "p"\n[measure]\nquick = true\n{arms}')
    return path


def _run_face(face: str, url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    if face == "load":
        out = ["--out", str(tmp_path / "load.json")]
        args = ["load", url, "--model", "m", "-c", "1", "--duration", "1s", *out]
        return _sagemeter([*args, "--api-key", KEY], home, real_process=True)
    if face == "measure":
        args = ["measure", str(tmp_path / "m"), url, "--quick", "--api-key", KEY]
        return _sagemeter(args, home, real_process=True)
    plan = _plan(tmp_path, url)
    args = ["run", str(plan), "--out", str(tmp_path / "run")]
    return _sagemeter(args, home, real_process=True, OPENAI_API_KEY=KEY)


@pytest.mark.parametrize("kind", ["json", "html", "cut"])
@pytest.mark.parametrize("face", ["load", "measure", "run"])
def test_an_echoed_key_reaches_no_terminal_and_no_file(
    face: str, kind: str, tmp_path: Path
) -> None:
    with _server(kind) as server:
        done = _run_face(face, server.url, tmp_path)
    shown = done.stdout + done.stderr
    assert "401" in shown, shown  # the failure is told ...
    assert "Traceback" not in shown
    assert not [piece for piece in TELLING if piece in shown], shown  # ... without the key
    written = [path for path in tmp_path.rglob("*") if path.is_file() and "home" not in path.parts]
    assert face != "load" or (tmp_path / "load.json").is_file()
    for path in written:
        text = path.read_text(errors="replace")
        assert not [piece for piece in TELLING if piece in text], (path, text[:2000])


HEADER_FACES = {
    "load --api-key": lambda bad, tmp: (["load", "http://127.0.0.1:9", "--api-key", bad], {}),
    "measure --api-key": lambda bad, tmp: (
        ["measure", str(tmp / "m"), "http://127.0.0.1:9", "--api-key", bad],
        {},
    ),
    "load OPENAI_API_KEY": lambda bad, tmp: (
        ["load", "http://127.0.0.1:9"],
        {"OPENAI_API_KEY": bad},
    ),
    "run OPENAI_API_KEY": lambda bad, tmp: (
        ["run", str(_plan(tmp, "http://127.0.0.1:9")), "--out", str(tmp / "run")],
        {"OPENAI_API_KEY": bad},
    ),
    "calibrate --require-key": lambda bad, tmp: (["calibrate-server", "--require-key", bad], {}),
    "sagemaker AWS_SECRET_ACCESS_KEY": lambda bad, tmp: (
        ["sagemaker", "list", "--region", "us-east-1"],
        {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": bad},
    ),
    "sagemaker AWS_SESSION_TOKEN": lambda bad, tmp: (
        ["sagemaker", "list", "--region", "us-east-1"],
        {
            "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI0123456789",
            "AWS_SESSION_TOKEN": bad,
        },
    ),
}


@pytest.mark.parametrize("face", list(HEADER_FACES))
def test_a_value_that_would_inject_a_header_is_refused_before_work(
    face: str, tmp_path: Path
) -> None:
    bad = "sk-fine-0123\r\nX-Injected: 1"
    args, env = HEADER_FACES[face](bad, tmp_path)
    done = _sagemeter(args, tmp_path / "home", AWS_EC2_METADATA_DISABLED="true", **env)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "control character" in lines[0], done.stderr
    assert "0123" not in done.stdout + done.stderr  # the value is never shown
    assert not (tmp_path / "m").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:9/v1\r\nX-Injected: 1",
        "http://127.0.0.1:9/a b",
        "http://127.0.0.1:9/\x1b[2J",
    ],
    ids=["crlf", "space", "escape"],
)
@pytest.mark.parametrize("face", ["load", "measure", "plan"])
def test_a_target_that_would_break_the_request_line_is_refused(
    face: str, target: str, tmp_path: Path
) -> None:
    if face == "plan":
        path = tmp_path / "plan.toml"
        arms = "".join(
            f'[[arm]]\nname = "{n}"\ntarget = {json.dumps(target)}\n' for n in ("a", "b")
        )
        path.write_text(f'name = "p"\n[measure]\nquick = true\n{arms}')
        args = ["run", str(path), "--out", str(tmp_path / "run")]
    elif face == "load":
        args = ["load", target, "--model", "m"]
    else:
        args = ["measure", str(tmp_path / "m"), target]
    done = _sagemeter(args, tmp_path / "home")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no spaces or control characters" in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and "\r" not in done.stderr
    assert not (tmp_path / "m").exists() and not (tmp_path / "run").exists()
