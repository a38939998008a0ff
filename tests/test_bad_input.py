"""Bad input, through the real `sagemeter` command: one clear line, a non-zero exit, no traceback,
and nothing measured first.

Every case that writes names a target where nothing listens (port 9): a check that came too
late would show as a connection error instead of the line expected.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemeter.errors import UserError
from tests import cli_run
from tests.conftest import reference_file

NOTHING = "http://127.0.0.1:9"


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """A folder with the things bad inputs point at."""
    (tmp_path / "o" / "measure-x.json").mkdir(parents=True)
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "garbage.gguf").write_bytes(b"this is no model" * 10)
    return tmp_path


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


LONG = "n" * 300
CASES: list[tuple[str, list[str], int, str]] = [
    ("result file is a folder", ["measure", "{tmp}/o", NOTHING, "--name", "x"], 2, "is a folder"),
    ("name too long", ["measure", "{tmp}/o", NOTHING, "--name", LONG], 2, "1–100 letters"),
    ("name with a tab", ["measure", "{tmp}/o", NOTHING, "--name", "a\tb"], 2, "1–100 letters"),
    ("hidden name", ["measure", "{tmp}/o", NOTHING, "--name", ".x"], 2, "not starting with a dot"),
    ("OUT_DIR is a file", ["measure", "{tmp}/a-file", NOTHING], 2, "is a file, not a folder"),
    ("OUT_DIR under a file", ["measure", "{tmp}/a-file/sub", NOTHING], 2, "is a file, so no"),
    ("OUT_DIR unwritable", ["measure", "/proc/sagemeter-out", NOTHING], 2, "cannot write there"),
    ("load --out a folder", ["load", NOTHING, "--out", "{tmp}/folder"], 2, "is a folder"),
    ("selfcheck --out a folder", ["selfcheck", "--out", "{tmp}/folder"], 2, "is a folder"),
    (
        "combine into a folder",
        ["combine", "{tmp}/folder", "{tmp}/a.json", "{tmp}/b.json"],
        2,
        "is a folder",
    ),
    ("demo --out a file", ["demo", "--out", "{tmp}/a-file"], 2, "is a file, not a folder"),
    ("report on a file", ["report", "{tmp}/a-file"], 2, "not a folder"),
    ("serve port too high", ["serve", "local:smollm2-q4_1", "--port", "99999"], 2, "--port"),
    ("serve no slots", ["serve", "local:smollm2-q4_1", "--parallel", "0"], 2, "--parallel"),
    ("levels too high", ["measure", "{tmp}/m", NOTHING, "--levels", "100000"], 2, "1–1024"),
    ("levels not numbers", ["measure", "{tmp}/m", NOTHING, "--levels", "1,x"], 2, "whole numbers"),
    ("levels zero", ["measure", "{tmp}/m", NOTHING, "--levels", "0"], 2, "positive"),
    ("load concurrency", ["load", NOTHING, "--concurrency", "100000"], 2, "1 to 4096"),
    (
        "price inf",
        ["combine", "{tmp}/c.json", "{tmp}/a.json", "{tmp}/b.json", "--price-per-hour", "inf"],
        2,
        "positive number of USD",
    ),
    (
        "price nan",
        ["combine", "{tmp}/c.json", "{tmp}/a.json", "{tmp}/b.json", "--price-per-hour", "nan"],
        2,
        "positive number of USD",
    ),
    ("not a GGUF", ["measure", "{tmp}/m", "local:{tmp}/garbage.gguf"], 2, "not a GGUF file"),
    ("missing GGUF", ["measure", "{tmp}/m", "local:{tmp}/none.gguf"], 2, "does not exist"),
    ("timeout zero", ["measure", "{tmp}/m", NOTHING, "--timeout", "0"], 2, "--timeout"),
    ("timeout words", ["measure", "{tmp}/m", NOTHING, "--timeout", "soon"], 2, "--timeout"),
    (
        "metrics wait",
        ["measure", "{tmp}/m", NOTHING, "--metrics-wait", "soon"],
        2,
        "--metrics-wait",
    ),
    ("retries negative", ["measure", "{tmp}/m", NOTHING, "--retries", "-1"], 2, "--retries"),
    ("bad target", ["measure", "{tmp}/m", "ftp://x"], 2, "accepted forms"),
    ("unknown bare name", ["measure", "{tmp}/m", "my-endpoint"], 2, "no SageMaker endpoint"),
    ("query in URL", ["measure", "{tmp}/m", "http://h:1/v1?x=1"], 2, "query"),
    ("questions file", ["measure", "{tmp}/m", NOTHING, "--questions", "/none.jsonl"], 2, "neither"),
    ("method", ["measure", "{tmp}/m", NOTHING, "--method", "mine"], 2, "--method"),
    (
        "prefill long first",
        ["measure", "{tmp}/m", NOTHING, "--prefill-tokens", "4096,256"],
        2,
        "--prefill-tokens 4096,256: the short length comes first",
    ),
    (
        "prefill words",
        ["measure", "{tmp}/m", NOTHING, "--prefill-tokens", "abc"],
        2,
        "--prefill-tokens 'abc': give two prompt lengths",
    ),
    (
        "prefill three",
        ["measure", "{tmp}/m", NOTHING, "--prefill-tokens", "64,256,4096"],
        2,
        "exactly two lengths",
    ),
    (
        "prefill tiny",
        ["measure", "{tmp}/m", NOTHING, "--quick", "--prefill-tokens", "1,2"],
        2,
        "from 16 to",
    ),
    ("truth prefill", ["calibrate-server", "--prefill", "soon"], 2, "--prefill"),
    ("missing argument", ["measure"], 2, "Missing argument"),
    ("unknown command", ["measur"], 2, "No such command"),
    ("unknown option", ["measure", "{tmp}/m", NOTHING, "--levle", "1"], 2, "No such option"),
    ("truth status", ["calibrate-server", "--fail-status", "200"], 2, "fail_status"),
    ("truth duration", ["calibrate-server", "--ttft", "-5ms"], 2, "--ttft"),
    ("load duration", ["load", NOTHING, "--duration", "never"], 2, "--duration"),
    ("load shard", ["load", NOTHING, "--shard", "3/2"], 2, "--shard"),
    ("nothing listening", ["load", NOTHING, "--duration", "1s"], 6, "cannot reach"),  # transport
    ("nothing to measure", ["measure", "{tmp}/m", NOTHING], 2, "does not answer as a chat API"),
    ("inspect nothing", ["inspect", "{tmp}/none.safetensors"], 2, "none.safetensors"),
]


def _run(
    args: list[str], home: Path, *, real_process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`sagemeter ARGS` in this process, or as its own process (a server it starts as a child)."""
    # No AWS region configured: a bare endpoint name then has no region to mean.
    aws = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")
    env = {key: value for key, value in os.environ.items() if key not in aws}
    env |= {"SAGEMETER_HOME": str(home), "COLUMNS": "200", "AWS_CONFIG_FILE": str(home / "none")}
    return (cli_run.run if real_process else cli_run.invoke)(args, env)


@pytest.mark.parametrize(("case", "args", "code", "needle"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line(
    case: str, args: list[str], code: int, needle: str, place: Path
) -> None:
    done = _run([arg.replace("{tmp}", str(place)) for arg in args], place / "home")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, (case, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert needle in lines[0], lines[0]
    assert not [path for path in place.glob("**/measure-*.json*") if path.is_file()]


@pytest.mark.slow
def test_a_refused_preflight_leaves_no_folder_the_command_made(place: Path) -> None:
    done = _run(["measure", str(place / "new" / "out"), NOTHING], place / "home")
    assert done.returncode == 2 and "does not answer as a chat API" in done.stderr
    assert not (place / "new").exists()  # both folders it made are gone


def test_only_the_empty_folders_a_failed_command_made_are_removed(tmp_path: Path) -> None:
    from sagemeter.atomic import removed_if_left_empty

    had = tmp_path / "had"
    had.mkdir()
    with pytest.raises(UserError), removed_if_left_empty(had / "a" / "b"):
        (had / "a" / "b").mkdir(parents=True)
        raise UserError("refused")
    assert had.is_dir() and not list(had.iterdir())  # the user's folder stays, empty
    with pytest.raises(UserError), removed_if_left_empty(tmp_path / "log" / "run"):
        (tmp_path / "log" / "run").mkdir(parents=True)
        (tmp_path / "log" / "run" / "engine.log").write_text("why it failed")
        raise UserError("the engine did not start")
    assert (tmp_path / "log" / "run" / "engine.log").is_file()  # something was written: kept
    with removed_if_left_empty(tmp_path / "ok"):
        (tmp_path / "ok").mkdir()
    assert (tmp_path / "ok").is_dir()  # success keeps what was made


@pytest.mark.slow
def test_the_engine_names_a_port_in_use(busy_port: int, tmp_path: Path) -> None:
    done = _run(
        ["serve", "local:smollm2-q4_1", "--port", str(busy_port)], tmp_path, real_process=True
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"port {busy_port} on 127.0.0.1 is already in use" in lines[-1]
    # Its log went under the state dir (SAGEMETER_HOME), not into /tmp.
    assert list((tmp_path / "state" / "logs").glob("smollm2-q4_1-*.log"))


def test_serving_mcp_on_a_busy_port_is_refused_before_it_starts(
    busy_port: int, tmp_path: Path
) -> None:
    """The library's `serve` (what `sagemeter mcp --http` calls) binds the port first."""
    from sagemeter.errors import UserError
    from sagemeter.mcp import ServerConfig
    from sagemeter.mcp.server import serve

    with pytest.raises(UserError) as refused:
        serve(ServerConfig(results_dir=tmp_path), http_port=busy_port)
    assert str(refused.value).startswith(f"port {busy_port} on 127.0.0.1 is in use: ")
    assert "\n" not in str(refused.value)


@pytest.mark.slow
def test_mcp_on_a_busy_port_is_one_line(busy_port: int, tmp_path: Path) -> None:
    """A port another process holds: one line naming it, before the server starts or says
    where it listens."""
    done = _run(
        ["mcp", "--http", str(busy_port), "--results-dir", str(tmp_path / "results")],
        tmp_path,
        real_process=True,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: port {busy_port} on 127.0.0.1 is in use: "), lines[0]
    assert done.stdout == ""


def _small_files_only() -> None:
    """In the child: files may grow to 512 bytes, and a write past that fails with EFBIG (as a
    full disk fails, after every upfront check passed) instead of killing the process."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_write_that_fails_after_the_checks_is_one_line(tmp_path: Path) -> None:
    files = [reference_file(f"measure-{name}.json") for name in ("gemma-4-e2b", "gemma-4-e2b-qat")]
    secret = "k3y-v4lue-in-a-path"  # the line still passes through the redaction
    out = tmp_path / secret / "compare.json"
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1",
           "OPENAI_API_KEY": secret}  # fmt: skip
    done = subprocess.run(
        cli_run.command("combine", out, *files),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        preexec_fn=_small_files_only,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    shown = str(out).replace(secret, "***")
    assert lines == [f"error: could not write: File too large ({shown})"], done.stderr
    assert "decode_tokens_per_second" in done.stdout  # the table came first, then the write
    assert list(out.parent.iterdir()) == []  # no partial file left looking complete
