"""`sagemeter checkpoints` and `sagemeter serve`: the engines sagemeter runs on this machine."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.progress import Progress, TaskID
from rich.table import Table

from sagemeter.cli.common import console, new_progress


def checkpoints(
    prepare: Annotated[
        bool, typer.Option(help="derive the 32-bit checkpoint now if missing")
    ] = False,
) -> None:
    """List the embedded engine's checkpoints with file size and bits per weight."""
    from sagemeter.engines.checkpoints import checkpoint_rows

    if prepare:
        _prepare_f32()
    table = Table(title="embedded-engine checkpoints (use as local:NAME)")
    for column in ("name", "storage", "size MiB", "bits/weight", "parameters", "file"):
        numeric = column in ("size MiB", "bits/weight", "parameters")
        table.add_column(column, justify="right" if numeric else "left")
    for row in checkpoint_rows():
        if not row.available:
            table.add_row(row.name, row.storage, "-", "-", "-", f"{row.note} (or --prepare)")
            continue
        table.add_row(
            row.name,
            row.storage,
            f"{row.size_mib:.1f}",
            f"{row.bits_per_weight:.2f}",
            f"{(row.parameters or 0) / 1e6:.1f} M",
            row.path,
        )
    console.print(table)


def _prepare_f32() -> None:
    """Derive the 32-bit file when it is missing; the bar shows only when something is derived
    (a file already there and whole is found without one)."""
    from sagemeter.engines.checkpoints import resolve_checkpoint

    shown: list[tuple[Progress, TaskID]] = []

    def progress(done: int, total: int) -> None:
        if not shown:
            bar = new_progress("tensors")
            bar.start()
            shown.append((bar, bar.add_task("deriving smollm2-f32", total=total)))
        bar, task = shown[0]
        bar.update(task, completed=done, total=total)

    try:
        resolve_checkpoint("smollm2-f32", progress=progress)
    finally:
        for bar, _ in shown:
            bar.stop()


def serve(
    target: Annotated[
        str,
        typer.Argument(help='local:CHECKPOINT, vllm:CHECKPOINT or cmd:"COMMAND --port {port}"'),
    ],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="port on 127.0.0.1 (0 picks a free one)")
    ] = 8080,
    **options: Any,
) -> None:
    """Run an engine's server (local:, vllm:, cmd:, a plug-in's) in the foreground for your own
    tools, until Ctrl-C."""
    from sagemeter.cli.engines import serve_target
    from sagemeter.options.faces import read_options
    from sagemeter.options.serve import SERVE, ServeOptions

    (given,) = read_options(SERVE, options, "cli")  # checked before anything starts
    assert isinstance(given, ServeOptions)
    serve_target(target, port, given)


def register(app: typer.Typer) -> None:
    """Add `checkpoints` and `serve` to the main app, serve's options made from its model."""
    from sagemeter.options.faces import with_options
    from sagemeter.options.serve import SERVE

    app.command()(checkpoints)
    app.command()(with_options(SERVE, "cli")(serve))
