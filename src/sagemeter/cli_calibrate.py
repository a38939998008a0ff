"""`sagemeter calibrate-server`: the known-truth server in the foreground, for any load tool.

Point guidellm, vllm bench, or `sagemeter load` at it: its timing is set here, so whatever a tool
reports can be checked against what a perfect client would see.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sagemeter.errors import UserError


def calibrate_server_command(
    ttft: Annotated[
        str, typer.Option(help="time to first token: 50ms, 0.05s or 0.05 (seconds)")
    ] = "50ms",
    itl: Annotated[str, typer.Option(help="time between tokens: 4ms, 0.004s or 0.004")] = "4ms",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="port on 127.0.0.1 (0 picks a free one)")
    ] = 0,
    port_file: Annotated[
        Path | None, typer.Option(help="write the port to this file once listening")
    ] = None,
) -> None:
    """Serve an OpenAI-compatible API on 127.0.0.1 with known timing, until Ctrl-C."""
    from sagemeter.atomic import write_text_atomic
    from sagemeter.calibrate.loops import run_precisely
    from sagemeter.calibrate.server import serve
    from sagemeter.calibrate.timing import TruthTiming, parse_duration

    timing = TruthTiming(parse_duration(ttft, "--ttft"), parse_duration(itl, "--itl"))
    console = Console(highlight=False)

    def ready(bound: int) -> None:
        if port_file is not None:
            write_text_atomic(port_file, f"{bound}\n")
        console.print(f"known-truth server at http://127.0.0.1:{bound} (OpenAI-compatible, /v1)")
        console.print(
            f"ttft {timing.ttft_s * 1000:g} ms, itl {timing.itl_s * 1000:g} ms: a 256-token reply "
            f"takes {timing.request_seconds(256):.3f} s, 16 at once make "
            f"{timing.tokens_per_second(16, 256):,.0f} tokens/s; GET /stats for its own CPU; "
            "Ctrl-C stops it"
        )

    try:
        with contextlib.suppress(KeyboardInterrupt):
            run_precisely(serve(timing, port, ready))
    except OSError as exc:
        raise UserError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    console.print("stopped")


def register(app: typer.Typer) -> None:
    """Add the `calibrate-server` command to the main app."""
    app.command("calibrate-server", help=(calibrate_server_command.__doc__ or "").strip())(
        calibrate_server_command
    )
