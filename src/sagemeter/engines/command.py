"""`cmd:COMMAND`: any OpenAI-compatible server, started from the user's own command line.

`cmd:"python -m sglang.launch_server --model M --port {port}"` is split as a shell would and run
without one, `{port}` replaced by a free port on 127.0.0.1, in its own process group under the
launcher (it never outlives sagemeter). It is ready when `/v1/models` lists a model; its output
is kept as the engine log (`engine-NAME.log` in a run's folder), whose start-up facts the same
parsers read as for a `--server-log` (vLLM, llama.cpp, SGLang). A command that exits before it
answers is named with the cause its log shows. It is stopped after the run, at Ctrl-C and on
failure: SIGTERM, then SIGKILL to the whole group after a grace period.

A command line can hold secrets (`--api-key X`); what sagemeter shows or stores of it has the
values of such flags masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

from sagemeter.engine_registry import Engine, StartRequest
from sagemeter.engines.endpoints import Endpoint, WireOptions, chat_client, process_of
from sagemeter.engines.launched import LaunchedServer, listed_models, tail
from sagemeter.engines.startup_causes import LLAMACPP_CAUSES, VLLM_CAUSES, matched_cause
from sagemeter.engines.waiting import wait_line
from sagemeter.errors import UserError
from sagemeter.paths import state_dir
from sagemeter.results import StartupFacts
from sagemeter.startup_log import parse_startup_log
from sagemeter.targets import PORT_MARK, CommandTarget, EngineTarget, masked_words, parse_command

START_TIMEOUT_S = 600.0  # a server that loads a model from disk; --startup-timeout changes it
GRACE_S = 10.0  # SIGTERM to SIGKILL


class CommandServer(LaunchedServer):
    """One server started from a `cmd:` target's command line."""

    what = "the command"
    grace_s = GRACE_S
    listens_itself = False  # `docker run -p {port}:8000` under rootless Docker: its forwarder

    def __init__(
        self,
        target: CommandTarget,
        *,
        log_path: Path,
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        super().__init__(log_path=log_path, port=port)
        self.target = target
        self.model: str | None = None
        self.api_key = api_key  # the requests' key: a server started with one guards /v1/models

    def command(self) -> list[str]:
        return [word.replace(PORT_MARK, str(self.port)) for word in self.target.words()]

    def shown_command(self) -> str:
        return " ".join(masked_words(self.command()))

    def working_folder(self) -> str | None:
        return self.target.cwd

    def exited(self, code: int) -> str:
        program = self.target.words()[0]
        return f"the command {program!r} exited with code {code} before it answered"

    def ready(self) -> bool:
        """It lists a model at /v1/models (the first is the one measured)."""
        models = listed_models(self.root_url, self.api_key)
        if models:
            self.model = models[0]
        return bool(models)

    def failure_cause(self, log_text: str) -> str:
        """The cause the log names, read as vLLM's or llama.cpp's, else its last lines."""
        if not log_text.strip():
            return "it wrote nothing"
        words = {"port": self.port, "model": "the model", "file": "the model file"}
        for causes in (VLLM_CAUSES, LLAMACPP_CAUSES):
            cause = matched_cause(log_text, causes, **words)
            if cause is not None:
                return cause

        lines = log_text.splitlines()[1:]  # past the `$ command` line sagemeter wrote
        return tail("\n".join(lines)) if any(line.strip() for line in lines) else "it wrote nothing"

    def startup_facts(self) -> StartupFacts:
        """What its log says of its start-up, read by whichever parser knows the server."""
        return parse_startup_log(self.log_text(), origin=f"engine log {self.log_path}")


def check_command(target: EngineTarget) -> None:
    """Before any work: the program exists and can be run."""
    assert isinstance(target, CommandTarget)
    program = target.words()[0]
    if "/" in program:
        path = Path(program).expanduser()
        if target.cwd is not None and not path.is_absolute():
            path = Path(target.cwd) / path  # where it will run
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UserError(
                f"target {target.default_name}: {program} is not a program that can run"
            )
    elif shutil.which(program) is None:
        raise UserError(f"target {target.default_name}: {program!r} is not on PATH")


def default_log_path(target: CommandTarget) -> Path:
    """Where a command started outside a run folder keeps its log: the state dir's logs."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return state_dir() / "logs" / f"{target.default_name}-{stamp}.log"


def _server(target: EngineTarget, request: StartRequest) -> CommandServer:
    assert isinstance(target, CommandTarget)
    return CommandServer(
        target,
        log_path=request.log_path or default_log_path(target),
        port=request.port,
        api_key=request.wire.api_key if request.wire else None,
    )


def _start(server: CommandServer, request: StartRequest) -> str:
    timeout = request.startup_timeout_s or START_TIMEOUT_S
    what = f"starting {server.target.default_name}"
    return server.start(
        timeout, lambda seconds: request.on_wait(wait_line(what, seconds, server.log_path))
    )


class CommandEngine:
    """The `cmd` engine: the registry's entry for `cmd:COMMAND` targets."""

    name = "cmd"
    form = 'cmd:"COMMAND --port {port}"'
    start_seconds = 60.0
    runs_commands = True

    def parse(self, spec: str, text: str) -> EngineTarget:
        return parse_command(spec, text)

    def check(self, target: EngineTarget) -> None:
        check_command(target)

    @contextlib.asynccontextmanager
    async def endpoint(
        self, target: EngineTarget, request: StartRequest
    ) -> AsyncIterator[Endpoint]:
        assert isinstance(target, CommandTarget)
        server = _server(target, request)
        try:
            # Inside the try: a cancel or Ctrl-C while it starts must still stop it.
            await asyncio.to_thread(_start, server, request)
            assert server.base_url is not None
            wire = request.wire or WireOptions()
            async with chat_client(server.base_url, wire, model=server.model) as client:
                yield Endpoint(
                    target=target,
                    backend="cmd",
                    client=client,
                    startup_facts=server.startup_facts,
                    http_root=server.base_url,
                    api_key=wire.api_key,
                    process=process_of(server),
                )
        finally:
            await asyncio.to_thread(server.stop)

    @contextlib.contextmanager
    def serving(self, target: EngineTarget, request: StartRequest) -> Iterator[CommandServer]:
        server = _server(target, request)
        with server:
            _start(server, request)
            yield server


COMMAND: Engine = CommandEngine()
