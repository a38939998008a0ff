"""Text from outside (a server's model name and error bodies, a result file's names and notes, a
question file) never reaches the terminal with its control characters raw, whichever command
prints it: each is shown escaped (`\\x1b`), so it cannot clear, retitle or rewrite the screen."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.table import Table

from sagemeter.printable import SafeConsole, printable_json
from tests import cli_run
from tests.conftest import reference_file
from tests.wire import WireServer, json_response

EVIL = "boom\x1b]0;owned\x07\x1b[2J\x9b31m\rover"
RAW = ("\x1b", "\x9b", "\r", "\x07")


def _raw_controls(text: str) -> list[str]:
    return [char for char in RAW if char in text]


def _server() -> WireServer:
    async def models(writer, body):  # type: ignore[no-untyped-def]
        writer.write(json_response(200, {"object": "list", "data": [{"id": f"m{EVIL}"}]}))

    async def fail(writer, body):  # type: ignore[no-untyped-def]
        writer.write(json_response(500, {"error": {"message": EVIL}}))

    return WireServer({"/v1/models": models, "/v1/chat/completions": fail})


def _sagemeter(
    args: list[str], home: Path, *, real_process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`sagemeter ARGS` in this process, or as its own process where more than this process's
    streams could reach the terminal (load's workers; measure against a live server)."""
    env = {**os.environ, "SAGEMETER_HOME": str(home), "COLUMNS": "300"}
    return (cli_run.run if real_process else cli_run.invoke)(args, env)


def _results_with_escapes(folder: Path) -> list[Path]:
    paths = []
    for name in ("measure-gemma-4-e2b.json", "measure-gemma-4-e2b-qat.json"):
        data = json.loads(reference_file(name).read_text())
        data["complete"] = False
        data["incomplete_because"] = [f"cut {EVIL}"]
        path = folder / name
        path.write_text(json.dumps(data))
        paths.append(path)
    return paths


@pytest.mark.parametrize("face", ["load", "measure", "combine", "questions show --json"])
def test_outside_text_is_shown_escaped(face: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    if face in ("load", "measure"):
        with _server() as server:
            if face == "load":
                args = ["load", server.url, "-c", "1", "--duration", "1s"]
                out = ["--out", str(tmp_path / "l.json")]
                done = _sagemeter([*args, *out], home, real_process=True)
            else:
                args = ["measure", str(tmp_path / "m"), server.url, "--quick"]
                done = _sagemeter(args, home, real_process=True)
        expected = "boom"
    elif face == "combine":
        a, b = _results_with_escapes(tmp_path)
        done = _sagemeter(["combine", str(tmp_path / "c.json"), str(a), str(b)], home)
        expected = "\\x1b"
    else:
        path = tmp_path / "q.jsonl"
        path.write_text(json.dumps({"prompt": EVIL, "answer": "4\x9b"}) + "\n")
        done = _sagemeter(["questions", "show", str(path), "--json"], home)
        expected = "\\u001b"
    shown = done.stdout + done.stderr
    assert expected in shown, shown  # the text is there ...
    assert not _raw_controls(shown), repr(shown)  # ... but escaped
    assert "Traceback" not in shown


def test_a_safe_console_escapes_every_renderable_and_keeps_its_own_styles() -> None:
    buffer = io.StringIO()
    console = SafeConsole(file=buffer, force_terminal=True, color_system="standard", width=200)
    table = Table()
    table.add_column("name")
    table.add_row(EVIL)
    console.print(table)
    console.print(f"[red]model:[/] {EVIL}", highlight=False)
    written = buffer.getvalue()
    assert "\x1b[31m" in written  # rich's own colour for [red]
    assert "\x1b]0;" not in written and "\x1b[2J" not in written and "\x9b" not in written
    assert written.count("boom\\x1b]0;owned") == 2


def test_terminal_json_has_c1_and_del_escaped_and_stays_json() -> None:
    text = printable_json(json.dumps({"a": "x\x9b\x7fy"}, ensure_ascii=False))
    assert "\x9b" not in text and "\x7f" not in text
    assert json.loads(text) == {"a": "x\x9b\x7fy"}


def test_a_copied_result_folder_fixture_is_untouched(tmp_path: Path) -> None:
    # The escapes above are written into copies: the shipped examples stay as they are.
    shutil.copy(reference_file("measure-gemma-4-e2b.json"), tmp_path / "copy.json")
    assert "\x1b" not in (tmp_path / "copy.json").read_text()
