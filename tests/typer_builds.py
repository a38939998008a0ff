"""typer's CliRunner builds its click command from the Typer app on every `invoke` (0.07 CPU-s
with every command): the tests invoke the same apps hundreds of times, so the build is kept per
app and the commands it holds at the time, and made again as soon as they change.

The entry point keeps its own the same way (`sagemeter.cli.app._click_command`); this is for the
tests that invoke an app directly (`CliRunner().invoke(APP, …)`).
"""

from __future__ import annotations

from typing import Any

import typer
import typer.main
import typer.testing

_build = typer.main.get_command
_built: dict[tuple[object, ...], Any] = {}
MAX_BUILT = 64


def built_command(app: typer.Typer) -> Any:
    """`typer.main.get_command(app)`, kept while `app` holds the same commands and callback."""
    key = (app, app.registered_callback, *app.registered_commands, *app.registered_groups)
    if key not in _built:
        if len(_built) >= MAX_BUILT:
            _built.clear()
        _built[key] = _build(app)
    return _built[key]


def keep_builds() -> None:
    """Make typer's CliRunner use `built_command`."""
    typer.testing._get_command = built_command  # type: ignore[attr-defined]
