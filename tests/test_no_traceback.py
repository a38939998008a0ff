"""No traceback on any input, as a class: every kind of bad input (a text file in the wrong
encoding or shape, a server that answers anything but the API, a target URL of any form) run
through every command that takes that kind of input, in-process through the real entry point
(`sagemeter.cli.app.main`, so its last guard is part of what is tested).

Each case asserts a non-zero exit, exactly one line on stderr, that the line names the input
(the file, the folder or the server's address), and no "Traceback". Servers are loopback
sockets that answer fixed bytes: mocked at the wire, never inside sagemeter.
"""

from __future__ import annotations

import codecs
import importlib
import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.types import CallToolResult

from sagemeter.errors import UserError
from sagemeter.targets import OpenAITarget, parse_target
from sagemeter.transport.address import parse_address
from tests.wire import fixed_answer_server

cli = importlib.import_module("sagemeter.cli.app")  # the module (the package names its app)
NOTHING = "http://127.0.0.1:9"  # nothing listens: a check that came too late says "cannot reach"
LINE = '{"prompt": "What is 2+2?", "answer": "4"}\n'


@pytest.fixture(scope="module", autouse=True)
def _every_command() -> Iterator[None]:
    """The app with every command, as `sagemeter --help` has it: one click command, built once."""
    cli._register_optional_commands([])
    yield


def run_main(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
             ) -> tuple[int, list[str], str]:  # fmt: skip
    """`sagemeter ARGS` in this process: exit code, stderr's non-empty lines, all of stderr."""
    monkeypatch.setattr(cli, "_handle_stop_signals", lambda: None)  # pytest keeps its own
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.delenv("SAGEMETER_DEBUG", raising=False)
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        cli.main(args)
    err = capsys.readouterr().err
    code = ended.value.code
    return code if isinstance(code, int) else 1, [ln for ln in err.splitlines() if ln.strip()], err


def assert_one_line(code: int, lines: list[str], err: str, names: str, exit_code: int) -> None:
    assert "Traceback" not in err, err
    assert code == exit_code, err
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    assert names in lines[0], (names, lines[0])


# ---- text files -------------------------------------------------------------------------------

CONTENTS: dict[str, bytes | None] = {
    "UTF-16": LINE.encode("utf-16"),
    "UTF-16 BE, BOM": codecs.BOM_UTF16_BE + LINE.encode("utf-16-be"),
    "latin-1 bytes": '{"prompt": "Grüße", "answer": "4"}\n'.encode("latin-1"),
    "NUL bytes": b"\x00" * 32,
    "a NUL inside UTF-8": LINE.encode()[:12] + b"\x00" + LINE.encode()[12:],
    "empty": b"",
    "a huge line": b"x" * (2 << 20) + b"\n",
    "nested past the stack": b"[" * 100_000 + b"\n",
    "UTF-8 BOM, wrong shape": codecs.BOM_UTF8 + b'["a", "list"]\n',
    "a folder": None,
}

# Every command that reads a file a person names, with where the file goes: `{file}` the file
# itself, `{dir}` a folder holding it under the name the command looks for.
READERS: dict[str, tuple[list[str], str]] = {
    "questions show": (["questions", "show", "{file}"], ""),
    "measure --questions": (["measure", "{tmp}/m", NOTHING, "--questions", "{file}"], ""),
    "demo --questions": (["demo", "--out", "{tmp}/d", "--questions", "{file}"], ""),
    "calibrate-server --questions": (
        ["calibrate-server", "--wrong-share", "0.1", "--questions", "{file}"],
        "",
    ),
    "fidelity collect --questions": (
        ["fidelity", "collect", "{tmp}/f.json", NOTHING, "--questions", "{file}"],
        "",
    ),
    "fidelity collect --reference": (
        ["fidelity", "collect", "{tmp}/f.json", NOTHING, "--reference", "{file}"],
        "",
    ),
    "fidelity compare": (["fidelity", "compare", "{file}", "{file}"], ""),
    "measure --fidelity-reference": (
        ["measure", "{tmp}/m", NOTHING, "--fidelity-reference", "{file}"],
        "",
    ),
    "combine": (["combine", "{tmp}/c.json", "{file}", "{file}"], ""),
    "run PLAN": (["run", "{file}", "--dry-run"], ""),
    "run --resume (journal)": (["run", "--resume", "{dir}"], "journal.json"),
    "report (compare.json)": (["report", "{dir}"], "compare.json"),
    "report (a result)": (["report", "{dir}"], "measure-a.json"),
    "load --trace": (["load", NOTHING, "--trace", "{file}"], ""),
    "load --tokenizer": (
        ["load", NOTHING, "--input-tokens", "fixed:8", "--tokenizer", "{dir}"],
        "tokenizer.json",
    ),
}


@pytest.mark.parametrize("content", list(CONTENTS))
@pytest.mark.parametrize("reader", list(READERS))
def test_a_bad_text_file_is_one_line_naming_it(
    reader: str,
    content: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args, inner = READERS[reader]
    raw = CONTENTS[content]
    folder = tmp_path / "given"
    folder.mkdir()
    path = folder / (inner or "given.txt")
    if raw is None:
        path.mkdir()
    else:
        path.write_bytes(raw)
    if reader == "report (a result)" and raw is not None:
        (folder / "compare.json").write_text('{"files": ["measure-a.json"]}')
    named = folder if inner else path
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    given = [a.format(file=path, dir=folder, tmp=tmp_path) for a in args]
    code, lines, err = run_main(given, capsys, monkeypatch)
    assert_one_line(code, lines, err, str(named), 2)
    assert not list(tmp_path.glob("**/measure-*.json.*")), "a half-written file was left"


def test_a_utf8_bom_is_read_as_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Notepad saves ("UTF-8 with BOM") is UTF-8: read, not refused."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + LINE.encode())
    with pytest.raises(SystemExit) as ended:
        cli.main(["questions", "show", str(path), "--json"])
    assert ended.value.code == 0
    assert '"What is 2+2?"' in capsys.readouterr().out


# ---- server replies ---------------------------------------------------------------------------

ANSWERS = {
    "headers only": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n",
    "garbage": b"\x00\xffSSH-2.0-hello\r\n\r\n",
    "HTML": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n<html></html>",
    "JSON of the wrong shape": b'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{"data": 7}\n',
    "ids that are no names": (
        b'HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n{"data": [{"id": 5}, 3, null]}'
    ),
    "a bad chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "JSON nested past the stack": b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
    + b"[" * 100_000,
    "a closed connection": b"",
}


def _serve(answer: bytes) -> Iterator[str]:
    with fixed_answer_server(answer) as address:
        yield address


@pytest.fixture(params=list(ANSWERS))
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _serve(ANSWERS[request.param])


@pytest.fixture
def plain_server() -> Iterator[str]:
    """A plain-HTTP server, for https:// to be tried against."""
    yield from _serve(ANSWERS["HTML"])


TALKERS = {
    "load": ["load", "{url}", "--duration", "1s", "-c", "1"],
    "measure": ["measure", "{tmp}/m", "{url}", "--quick"],
    "fidelity collect": ["fidelity", "collect", "{tmp}/f.json", "{url}"],
}


@pytest.mark.parametrize("command", list(TALKERS))
def test_a_server_that_is_no_api_is_one_line_naming_it(
    command: str,
    server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    args = [a.format(url=f"http://{server}", tmp=tmp_path) for a in TALKERS[command]]
    code, lines, err = run_main(args, capsys, monkeypatch)
    assert_one_line(code, lines, err, server, code)
    assert code in (2, 6), err  # bad input, or the endpoint could not be reached
    assert not (tmp_path / "m").exists() or not list((tmp_path / "m").iterdir())


@pytest.mark.parametrize("command", list(TALKERS))
def test_https_to_a_plain_server_says_so(
    command: str,
    plain_server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    args = [a.format(url=f"https://{plain_server}", tmp=tmp_path) for a in TALKERS[command]]
    code, lines, err = run_main(args, capsys, monkeypatch)
    assert_one_line(code, lines, err, plain_server.split(":")[1], code)
    assert code in (2, 6) and "may not speak https; try http://" in lines[0], lines[0]


# ---- target URLs ------------------------------------------------------------------------------

BAD_URLS = {
    "http://127.0.0.1:0": "port 0 is no server's port",
    "http://127.0.0.1:99999": "bad port",
    "http://127.0.0.1:ab": "bad port",
    "http://[::1:8000": "brackets do not close",
    "http://": "has no host",
    "http://127.0.0.1 :8000": "no spaces or control characters",
    "http://127.0.0.1:8000/\x1b[31m": "no spaces or control characters",
    "http://u:p@127.0.0.1:8000": "no query, fragment or credentials",
    "http://127.0.0.1:8000/v1?x=1": "no query, fragment or credentials",
}
URL_TAKERS = {
    "load": ["load", "{url}", "--duration", "1s"],
    "measure": ["measure", "{tmp}/m", "{url}"],
    "fidelity collect": ["fidelity", "collect", "{tmp}/f.json", "{url}"],
}


@pytest.mark.parametrize("url", list(BAD_URLS))
@pytest.mark.parametrize("command", list(URL_TAKERS))
def test_a_bad_url_is_the_same_line_on_every_command(
    command: str,
    url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    args = [a.format(url=url, tmp=tmp_path) for a in URL_TAKERS[command]]
    code, lines, err = run_main(args, capsys, monkeypatch)
    assert_one_line(code, lines, err, BAD_URLS[url], 2)
    assert "--name" not in lines[0]


@pytest.mark.parametrize(
    "given",
    [
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/",
        "http://127.0.0.1:8000/v1/chat/completions",
        "http://127.0.0.1:8000/v1/completions",
        "http://127.0.0.1:8000/v1/models",
        "HTTP://127.0.0.1:8000/v1",
    ],
)
def test_every_form_of_one_server_is_recorded_as_its_base(given: str) -> None:
    target = parse_target(given)
    assert isinstance(target, OpenAITarget)
    assert target.base_url == "http://127.0.0.1:8000/v1"
    assert parse_address(given).base_url == "http://127.0.0.1:8000"
    assert target.default_name == "127.0.0.1-8000"


def test_a_prefix_before_v1_is_kept() -> None:
    assert str(parse_target("https://h.example/openai/v1/chat/completions")) == (
        "https://h.example/openai/v1"
    )


def test_an_ipv6_target_gets_a_valid_file_name() -> None:
    from sagemeter.results import check_result_name

    for url, name in (
        ("http://[::1]:8000", "ipv6-1-8000"),
        ("http://[fe80::2]:9", "ipv6-fe80-2-9"),
    ):
        target = parse_target(url)
        assert isinstance(target, OpenAITarget) and target.default_name == name
        check_result_name(target.default_name)  # the name measure would use by default


# ---- the last guard ---------------------------------------------------------------------------


@pytest.fixture
def failing_command() -> Iterator[None]:
    """A command that fails the way a bug would: the entry point is what is under test."""

    def broken(kind: str) -> None:
        if kind == "group":
            raise ExceptionGroup("tasks", [ValueError("x"), UserError("a line of its own")])
        raise KeyError("a key nobody expected")

    cli.app.command("broken-for-test")(broken)
    yield
    cli.app.registered_commands = [
        c for c in cli.app.registered_commands if c.name != "broken-for-test"
    ]


def test_an_unexpected_error_is_one_line_and_a_hint(
    failing_command: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, lines, err = run_main(["broken-for-test", "key"], capsys, monkeypatch)
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: unexpected KeyError: 'a key nobody expected'")
    assert "SAGEMETER_DEBUG=1" in lines[0] and "report it" in lines[0]


def test_debug_shows_the_traceback(failing_command: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_handle_stop_signals", lambda: None)
    monkeypatch.setenv(cli.DEBUG_VARIABLE, "1")
    with pytest.raises(KeyError, match="a key nobody expected"):
        cli.main(["broken-for-test", "key"])


def test_a_sagemeter_error_inside_a_task_group_keeps_its_line(
    failing_command: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, lines, err = run_main(["broken-for-test", "group"], capsys, monkeypatch)
    assert (code, lines) == (2, ["error: a line of its own"]), err


async def test_an_unexpected_error_in_an_mcp_tool_is_one_sentence() -> None:
    from sagemeter.mcp.guard import guarded

    @guarded
    async def tool() -> CallToolResult:
        raise KeyError("/private/path/in/the/message")

    answer = await tool()
    text = answer.content[0].text  # type: ignore[union-attr]
    assert answer.is_error and "\n" not in text and "Traceback" not in text
    assert text.startswith("unexpected KeyError") and "/private" not in text


def test_https_where_nothing_listens_is_refused_not_tls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    code, lines, err = run_main(["measure", str(tmp_path / "m"), "https://127.0.0.1:9"], capsys,
                                monkeypatch)  # fmt: skip
    assert_one_line(code, lines, err, "127.0.0.1:9", 2)
    assert "Connection refused" in lines[0] and "TLS" not in lines[0], lines[0]


# ---- the MCP face -----------------------------------------------------------------------------

MCP_CONTENTS = ("UTF-16", "latin-1 bytes", "a NUL inside UTF-8", "empty", "nested past the stack")
MCP_READERS: dict[str, tuple[str, str, dict[str, object]]] = {
    "compare_results.results": (
        "bad.json",
        "compare_results",
        {"results": ["bad.json", "bad.json"]},
    ),
    "measure_endpoint.questions": (
        "bad.jsonl",
        "measure_endpoint",
        {"target": NOTHING, "questions": "bad.jsonl", "quick": True},
    ),
    "run_experiment.plan_file": (
        "bad.toml",
        "run_experiment",
        {"plan_file": "bad.toml", "dry_run": True},
    ),
    "run_experiment.resume": (
        "runs/bad/journal.json",
        "run_experiment",
        {"resume": "bad", "dry_run": True},
    ),
}


@pytest.mark.parametrize("content", MCP_CONTENTS)
@pytest.mark.parametrize("argument", list(MCP_READERS))
async def test_an_mcp_tool_given_a_bad_text_file_answers_one_sentence(
    argument: str, content: str, tmp_path: Path
) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line

    name, tool, call = MCP_READERS[argument]
    results = tmp_path / "results"
    (results / "runs" / "bad").mkdir(parents=True)
    raw = CONTENTS[content]
    assert raw is not None
    (results / name).write_bytes(raw)
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        line = error_line(await client.call_tool(tool, call))
    assert name in line, line


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://[::1:8000", "brackets do not close"),
        ("http://127.0.0.1:0", "port 0 is no server's port"),
        ("http://127.0.0.1 :8000", "no spaces or control characters"),
    ],
)
async def test_an_mcp_tool_given_a_bad_url_answers_the_cli_line(
    url: str, needle: str, tmp_path: Path
) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line

    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        for tool in ("measure_endpoint", "find_operating_point"):
            args: dict[str, object] = {"target": url}
            if tool == "measure_endpoint":
                args["quick"] = True
            else:
                args |= {"name": "x", "slo_ttft_ms": 500}
            line = error_line(await client.call_tool(tool, args))
            assert needle in line, (tool, line)


async def test_an_mcp_measure_of_a_server_that_is_no_api_is_one_sentence(
    server: str, tmp_path: Path
) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line

    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        answer = await client.call_tool(
            "measure_endpoint", {"target": f"http://{server}", "quick": True}
        )
    assert server in error_line(answer)


# ---- checkpoint headers -----------------------------------------------------------------------


def _safetensors(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def _entry(**fields: object) -> bytes:
    return json.dumps(
        {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], **fields}}
    ).encode()


HEADERS: dict[str, tuple[str, bytes]] = {
    "header not JSON": (".safetensors", _safetensors(b"\xff\xfe not json")),
    "header a list": (".safetensors", _safetensors(b"[1, 2]")),
    "header nested past the stack": (".safetensors", _safetensors(b"[" * 100_000)),
    "entry of the wrong types": (".safetensors", _safetensors(_entry(shape="x"), b"\0" * 8)),
    "a negative dimension": (".safetensors", _safetensors(_entry(shape=[-2, 2]), b"\0" * 8)),
    "offsets past the end": (".safetensors", _safetensors(_entry(data_offsets=[0, 10**12]))),
    "two bytes": (".safetensors", b"\x01\x02"),
    "GGUF of random bytes": (".gguf", bytes(range(256))),
    "GGUF magic, absurd counts": (
        ".gguf",
        b"GGUF" + struct.pack("<IQQ", 3, 10**15, 10**15) + bytes(64),
    ),
}


@pytest.mark.parametrize("case", list(HEADERS))
def test_a_broken_checkpoint_header_is_one_line_in_inspect(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix, raw = HEADERS[case]
    path = tmp_path / f"model{suffix}"
    path.write_bytes(raw)
    code, lines, err = run_main(["inspect", str(path)], capsys, monkeypatch)
    assert_one_line(code, lines, err, str(path), 2)


def test_a_checkpoint_folder_with_a_bad_index_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "model.safetensors.index.json").write_bytes('{"weight_map": {}}'.encode("utf-16"))
    code, lines, err = run_main(["inspect", str(tmp_path)], capsys, monkeypatch)
    assert_one_line(code, lines, err, "model.safetensors.index.json: is UTF-16 text", 2)


@pytest.mark.parametrize("command", list(URL_TAKERS))
def test_an_ipv6_target_is_tried_not_blamed_on_its_name(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing listens on [::1]:9: the line says so (exit 2 for measure's and fidelity's
    preflight, 6 for load), in brackets, and never blames the default --name."""
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    args = [a.format(url="http://[::1]:9", tmp=tmp_path) for a in URL_TAKERS[command]]
    code, lines, err = run_main(args, capsys, monkeypatch)
    assert_one_line(code, lines, err, "[::1]:9", code)
    assert code in (2, 6) and "--name" not in lines[0], lines[0]


def test_ctrl_c_inside_a_task_group_is_still_ctrl_c(
    failing_command: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted() -> None:
        raise BaseExceptionGroup("tasks", [KeyboardInterrupt()])

    cli.app.command("interrupted-for-test")(interrupted)
    try:
        code, lines, err = run_main(["interrupted-for-test"], capsys, monkeypatch)
    finally:
        cli.app.registered_commands = [
            c for c in cli.app.registered_commands if c.name != "interrupted-for-test"
        ]
    assert code == 130 and len(lines) == 1 and "unexpected" not in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("content", ["UTF-16", "UTF-16 BE, BOM", "a folder"])
def test_a_server_log_that_cannot_be_read_is_one_line_naming_it(
    content: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A log is read before the target is asked (a wrong log fails at once)."""
    path = tmp_path / "server.log"
    raw = CONTENTS[content]
    path.mkdir() if raw is None else path.write_bytes(raw)
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    args = ["measure", str(tmp_path / "m"), NOTHING, "--server-log", str(path)]
    code, lines, err = run_main(args, capsys, monkeypatch)
    assert_one_line(code, lines, err, f"--server-log {path}", 2)


def test_a_log_with_bytes_that_are_not_utf8_is_still_read(tmp_path: Path) -> None:
    """A log is not refused for a stray byte: its start-up facts are still found."""
    from sagemeter.textfiles import read_log

    path = tmp_path / "server.log"
    path.write_bytes(b"\x1b[2K\xff progress\nINFO: Started server process [42]\n")
    text = read_log(path, what="--server-log")
    assert "Started server process [42]" in text and "\ufffd" in text
