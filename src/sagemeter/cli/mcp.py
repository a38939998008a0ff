"""`sagemeter mcp`: run the MCP server for an AI assistant (stdio, or HTTP on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sagemeter.cli import interrupt as activity
from sagemeter.printable import SafeConsole
from sagemeter.sagemaker.endpoint import DEFAULT_POLL_S


def mcp_command(
    allow_write: Annotated[
        bool, typer.Option("--allow-write", help="allow deploying and deleting SageMaker endpoints")
    ] = False,
    allow_logs: Annotated[
        bool, typer.Option("--allow-logs", help="allow reading endpoints' container logs")
    ] = False,
    allow_commands: Annotated[
        bool,
        typer.Option(
            "--allow-commands",
            help='allow cmd:"COMMAND" targets (they run a program on this machine)',
        ),
    ] = False,
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            metavar="PORT",
            min=1,
            max=65535,
            help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio",
        ),
    ] = None,
    results_dir: Annotated[
        Path | None,
        typer.Option(help="where result files go (default: mcp-results in the state dir)"),
    ] = None,
    poll_seconds: Annotated[float, typer.Option(hidden=True)] = DEFAULT_POLL_S,
) -> None:
    """Serve the deploy → measure → compare → delete loop as MCP tools (logs on stderr)."""
    from sagemeter.atomic import check_output_folder
    from sagemeter.mcp import ServerConfig, serve
    from sagemeter.mcp.config import default_results_dir
    from sagemeter.mcp.server import check_port

    if http is not None:
        check_port(http)  # before the banner, so a busy port is the only line

    if results_dir is not None:
        # as given, before resolve makes it absolute (a URL) or follows a link to nothing
        check_output_folder(results_dir.expanduser(), "--results-dir", make=False)
    folder = results_dir.expanduser().resolve() if results_dir else default_results_dir()
    config = ServerConfig(
        allow_write=allow_write,
        allow_logs=allow_logs,
        allow_commands=allow_commands,
        results_dir=check_output_folder(folder, "--results-dir"),
        poll_s=poll_seconds,
    )
    where = "stdio" if http is None else f"http://127.0.0.1:{http}/mcp"
    SafeConsole(stderr=True, highlight=False, markup=False).print(
        f"sagemeter mcp on {where}: deploy/delete "
        f"{'allowed' if allow_write else 'refused (--allow-write)'}, logs "
        f"{'allowed' if allow_logs else 'refused (--allow-logs)'}, cmd: targets "
        f"{'allowed' if allow_commands else 'refused (--allow-commands)'}, results in "
        f"{config.results_dir}"
    )
    activity.doing(f"serving MCP on {where}")
    try:
        serve(config, http_port=http)
        if http is not None:  # uvicorn took the signal itself and shut down: the same line
            SafeConsole(stderr=True, highlight=False, markup=False).print("stopped")
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP: its calls were cancelled (each
        # stops as a cancelled call does: a run deletes what it made) and its engines stopped
        SafeConsole(stderr=True, highlight=False, markup=False).print("stopped")


def register(app: typer.Typer) -> None:
    """Add the `mcp` command to the main app."""
    app.command("mcp", help=(mcp_command.__doc__ or "").strip())(mcp_command)
