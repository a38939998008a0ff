"""`truth:TTFT/ITL`: sagemeter's truth server, whose timing is known, as an engine plug-in.

A complete example of the `sagemeter.engines` entry-point group: a target type, and one object
that parses it, checks it, starts its server for `measure` (an Endpoint) and for `serve`/`load`
(a running server), and stops it on any exit.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.timing import parse_duration
from sagemeter.engines.endpoints import Endpoint, WireOptions, chat_client
from sagemeter.engines.registry import Engine, StartRequest
from sagemeter.errors import UserError
from sagemeter.targets import EngineTarget


@dataclass(frozen=True)
class TruthTarget(EngineTarget):
    """`truth:20ms/2ms`: a truth server with that time to first token and gap between tokens."""

    ttft_s: float
    itl_s: float
    engine: ClassVar[str] = "truth"

    @property
    def default_name(self) -> str:
        return f"truth-{self.ttft_s * 1000:g}ms-{self.itl_s * 1000:g}ms"

    def __str__(self) -> str:
        return f"truth:{self.ttft_s * 1000:g}ms/{self.itl_s * 1000:g}ms"


@dataclass
class RunningTruth:
    """What `serve` and `load` hold: where it answers, where it logs, how to stop it."""

    base_url: str | None
    log_path: Path
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def is_running(self) -> bool:
        return self.base_url is not None

    def stop(self) -> None:
        self.base_url = None
        self.stack.close()


class TruthEngine:
    """The registry's entry: its name is the target prefix and the entry point's name."""

    name = "truth"
    form = "truth:TTFT/ITL"
    start_seconds = 1.0
    runs_commands = False

    def parse(self, spec: str, text: str) -> EngineTarget:
        ttft, slash, itl = spec.partition("/")
        if not slash:
            raise UserError(f"target {text!r}: write truth:TTFT/ITL, e.g. truth:20ms/2ms")
        return TruthTarget(parse_duration(ttft, "TTFT"), parse_duration(itl, "ITL"))

    def check(self, target: EngineTarget) -> None:
        assert isinstance(target, TruthTarget)  # nothing to find on disk: a pure function

    @contextlib.asynccontextmanager
    async def endpoint(
        self, target: EngineTarget, request: StartRequest
    ) -> AsyncIterator[Endpoint]:
        assert isinstance(target, TruthTarget)
        with running_truth_server(TruthTiming(target.ttft_s, target.itl_s)) as root:
            async with chat_client(root + "/v1", request.wire or WireOptions()) as client:
                yield Endpoint(target=target, backend="truth", client=client, http_root=root)

    @contextlib.contextmanager
    def serving(self, target: EngineTarget, request: StartRequest) -> Iterator[RunningTruth]:
        assert isinstance(target, TruthTarget)
        running = RunningTruth(None, request.log_path or Path(tempfile.gettempdir()) / "truth.log")
        with running.stack:
            root = running.stack.enter_context(
                running_truth_server(TruthTiming(target.ttft_s, target.itl_s))
            )
            running.base_url = root + "/v1"
            yield running


TRUTH: Engine = TruthEngine()
