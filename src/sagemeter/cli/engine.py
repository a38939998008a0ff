"""`sagemeter checkpoints` and `sagemeter serve`: the engines sagemeter runs on this machine."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from sagemeter.cli.common import console, err_console, new_progress, serve_until_ctrl_c
from sagemeter.errors import UserError


def checkpoints(
    prepare: Annotated[
        bool, typer.Option(help="derive the 32-bit checkpoint now if missing")
    ] = False,
) -> None:
    """List the embedded engine's checkpoints with file size and bits per weight."""
    from sagemeter.engines.checkpoints import checkpoint_rows, resolve_checkpoint

    if prepare:
        with new_progress("tensors") as bar:
            task = bar.add_task("deriving smollm2-f32", total=None)
            resolve_checkpoint(
                "smollm2-f32",
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
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


def serve(
    target: Annotated[str, typer.Argument(help="local:CHECKPOINT or vllm:CHECKPOINT")],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="port on 127.0.0.1 (0 picks a free one)")
    ] = 8080,
    parallel: Annotated[
        int, typer.Option(min=1, max=512, help="parallel slots (embedded engine)")
    ] = 16,
) -> None:
    """Run the embedded engine or vLLM in the foreground for your own tools, until Ctrl-C."""
    from sagemeter.engines.checkpoints import resolve_checkpoint
    from sagemeter.engines.llamacpp import LocalEngine
    from sagemeter.targets import LocalTarget, VllmTarget, parse_target

    parsed = parse_target(target)
    if isinstance(parsed, VllmTarget):
        from sagemeter.cli.engines import serve_vllm

        serve_vllm(parsed, port)
        return
    if not isinstance(parsed, LocalTarget):
        raise UserError(
            f"serve runs a local engine only; give local:CHECKPOINT or vllm:CHECKPOINT, "
            f"not {target!r}"
        )
    checkpoint = resolve_checkpoint(parsed.checkpoint)
    engine = LocalEngine(checkpoint, parallel=parallel, port=port)
    from sagemeter.engines.waiting import wait_line

    what = f"starting {checkpoint.name}"
    with err_console.status(what) as shown:
        engine.start(
            on_wait=lambda seconds: shown.update(wait_line(what, seconds, engine.log_path))
        )
    serve_until_ctrl_c(
        engine,
        serving=lambda: (
            f"serving {checkpoint.name} at [bold]{engine.base_url}[/] (OpenAI-compatible)"
        ),
        log_label="engine log",
        died="the engine stopped unexpectedly",
    )


def register(app: typer.Typer) -> None:
    """Add `checkpoints` and `serve` to the main app."""
    app.command()(checkpoints)
    app.command()(serve)
