"""Engines are plug-ins: the servers sagemeter starts and stops on this machine, by target prefix.

An engine is one object (the `Engine` protocol) registered under the entry-point group
`sagemeter.engines`, its entry point's name being its target prefix (`local` for
`local:CHECKPOINT`). sagemeter's own (`local`, `vllm`, `cmd`) are registered the same way in its
pyproject.toml; another distribution adds one by naming an object in that group. `measure`,
`load`, `serve`, plans and the dry run's estimate reach every engine only through this module.

It sits below the engines and `targets` (which parses `ENGINE:SPEC` through it) and imports
neither; plug-ins import it by its public name, `sagemeter.engines.registry`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeGuard, runtime_checkable

from sagemeter.errors import UserError
from sagemeter.plugins import load_group

if TYPE_CHECKING:
    from sagemeter.engines.endpoints import Endpoint, WireOptions
    from sagemeter.inspect.hub import HubSource
    from sagemeter.inspect.sources import LocalSource
    from sagemeter.targets import EngineTarget

GROUP = "sagemeter.engines"
# sagemeter's own engines, also declared in its pyproject.toml: found even when the installed
# metadata is older than the source (an editable install not yet refreshed).
BUILT_IN = {
    "local": "sagemeter.engines.builtin:LOCAL",
    "vllm": "sagemeter.engines.builtin:VLLM",
    "cmd": "sagemeter.engines.command:COMMAND",
}

# ENGINE:SPEC, the prefix naming an engine (not a URL's scheme://).
ENGINE_PREFIX = re.compile(r"^([a-z][a-z0-9_-]*):(?!//)(.*)$", re.DOTALL)


@dataclass(frozen=True)
class StartRequest:
    """What the measurement needs of a server an engine starts."""

    concurrency: int = 1
    max_reply_tokens: int = 512
    max_prompt_tokens: int = 0
    log_path: Path | None = None
    wire: WireOptions | None = None
    port: int = 0  # 0: a free port
    startup_timeout_s: float | None = None  # None: the engine's own
    # `serve --parallel` and `--ctx-per-slot`: the slots a server keeps and the context of each,
    # for engines that have slots (the embedded one); None: the engine's own from the above.
    slots: int | None = None
    ctx_per_slot: int | None = None
    # Told a line while the server starts: seconds spent and its log's last line (`waiting`).
    on_wait: Callable[[str], None] = field(default=lambda _line: None, compare=False)
    # Told what the engine does before it starts the server (vLLM: "preparing … (exported once,
    # then cached)", then "starting vLLM …"), for the face's status line.
    on_status: Callable[[str], None] = field(default=lambda _line: None, compare=False)


@runtime_checkable
class Served(Protocol):
    """A server an engine started for `serve` or `load`: where it answers and where it logs."""

    base_url: str | None
    log_path: Path

    def is_running(self) -> bool: ...

    def stop(self) -> None: ...


@runtime_checkable
class Engine(Protocol):
    """One kind of server sagemeter starts on this machine."""

    name: str  # the target prefix
    form: str  # how a target is written, for help and errors: "cmd:COMMAND"
    start_seconds: float  # one start, as the dry run's estimate counts it
    runs_commands: bool  # it runs a command line the caller wrote (MCP refuses unless allowed)

    def parse(self, spec: str, text: str) -> EngineTarget:
        """The target `ENGINE:SPEC`, or a UserError naming what is wrong with `text`."""
        ...

    def check(self, target: EngineTarget) -> None:
        """Fail before any work when the target cannot start (a missing file or program)."""
        ...

    def endpoint(
        self, target: EngineTarget, request: StartRequest
    ) -> AbstractAsyncContextManager[Endpoint]:
        """Start the server, yield its Endpoint to measure, stop it on exit (any exit)."""
        ...

    def serving(
        self, target: EngineTarget, request: StartRequest
    ) -> AbstractContextManager[Served]:
        """Start the server for `serve` or `load` and stop it on exit (any exit)."""
        ...


@dataclass(frozen=True)
class ServeWords:
    """What `sagemeter serve` says of a server it holds: `serving NAME at URL DETAIL`, then
    `LOG_LABEL: PATH; Ctrl-C stops it`, and `DIED; see PATH` when it ends by itself."""

    name: str
    detail: str = ""  # after the URL: "(vLLM, OpenAI-compatible)"
    log_label: str = "engine log"
    died: str = ""  # "" says "NAME stopped unexpectedly"

    @property
    def died_line(self) -> str:
        return self.died or f"{self.name} stopped unexpectedly"


@runtime_checkable
class DescribesServing(Protocol):
    """An engine's optional member: its own words for `serve` (the embedded engine names its
    slots, vLLM itself). An engine without it is `serving TARGET-NAME at URL`."""

    def serve_words(self, target: EngineTarget, served: Served) -> ServeWords:
        """The words for `served`, started by this engine's `serving(target, …)`."""
        ...


def serve_words(engine: Engine, target: EngineTarget, served: Served) -> ServeWords:
    """What `serve` says of `served`: the engine's own words, else the target's name."""
    if isinstance(engine, DescribesServing):
        return engine.serve_words(target, served)
    return ServeWords(target.default_name)


@runtime_checkable
class ReadsSources(Protocol):
    """An engine's optional member: what `sagemeter inspect ENGINE:SPEC` reads (inspect/sources.py
    asks it). An engine without it has no inspect source: the text is then read as a path."""

    def source(self, spec: str, text: str) -> LocalSource | HubSource:
        """The files the engine would load for `spec` (`text`: the source as written, for a
        UserError), found without deriving, exporting or downloading anything."""
        ...


@functools.cache
def _loaded() -> dict[str, Engine | str]:
    """Every engine installed by target prefix, or the one line saying why one cannot load (a
    broken plug-in is its own prefix's problem, never every engine's)."""
    return load_group(GROUP, BUILT_IN, "engine", _keeps_protocol)


def _keeps_protocol(found: object) -> TypeGuard[Engine]:
    return isinstance(found, Engine)


def engines() -> dict[str, Engine]:
    """Every engine that loads, by target prefix: sagemeter's own and the plug-ins'."""
    return {name: engine for name, engine in _loaded().items() if isinstance(engine, Engine)}


def engine_named(name: str) -> Engine | None:
    """The engine whose targets start `NAME:`, if one is installed; a plug-in of that name that
    cannot load is one UserError saying why."""
    engine = _loaded().get(name)
    if isinstance(engine, str):
        raise UserError(engine)
    return engine


def started_here(backend: str) -> bool:
    """Whether a result's backend is an installed engine's (`local`, `vllm`, `cmd`, a plug-in's):
    a server sagemeter started on the measuring host, so the host's facts are the server's."""
    return backend in engines()


def engine_in(text: str) -> Engine | None:
    """The engine a target string names by its prefix (`cmd:…` → cmd), if one is installed;
    None for other forms (URLs, SageMaker names)."""
    prefix = ENGINE_PREFIX.match(text.strip())
    return engine_named(prefix.group(1)) if prefix else None


def engine_of(target: EngineTarget) -> Engine:
    """The engine that starts `target`."""
    engine = engine_named(target.engine)
    if engine is None:  # only a target built by hand for an engine not installed
        raise UserError(f"no engine {target.engine!r} is installed for {target}")
    return engine
