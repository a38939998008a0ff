"""typer's CliRunner builds its click command from the Typer app on every `invoke` (0.07 CPU-s
with every command): the tests invoke the same apps hundreds of times, so they keep the build as
the entry point does (`sagemeter.cli.app.built_command`: per app and the commands it holds at
the time, made again as soon as they change).
"""

from __future__ import annotations

import typer.testing

from sagemeter.cli.app import built_command


def keep_builds() -> None:
    """Make typer's CliRunner use the entry point's `built_command`."""
    typer.testing._get_command = built_command  # type: ignore[attr-defined]
