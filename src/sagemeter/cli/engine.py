"""`sagemeter checkpoints` and `sagemeter serve`: the engines sagemeter runs on this machine."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import Progress, TaskID
from rich.table import Table

from sagemeter.cli import interrupt as activity
from sagemeter.cli.common import console, err_console, new_progress, serve_until_ctrl_c
from sagemeter.engines.llamacpp import MAX_SLOTS
from sagemeter.errors import UserError


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
    parallel: Annotated[
        int, typer.Option(min=1, max=MAX_SLOTS, help="parallel slots (embedded engine)")
    ] = 16,
    startup_timeout: Annotated[
        str | None,
        typer.Option(
            help="cmd: targets: the longest wait for the server to answer [10m]",
            show_default=False,
        ),
    ] = None,
    ctx_per_slot: Annotated[
        int | None,
        typer.Option(
            min=256,
            max=131072,
            show_default=False,
            help="tokens of context per slot, prompt and reply (embedded engine) [1024, as "
            "measure's: one KV cache size for both]",
        ),
    ] = None,
) -> None:
    """Run the embedded engine or vLLM in the foreground for your own tools, until Ctrl-C."""
    from sagemeter.calibrate.timing import parse_duration
    from sagemeter.engines.checkpoints import resolve_checkpoint
    from sagemeter.engines.llamacpp import DEFAULT_CTX_PER_SLOT, LocalEngine
    from sagemeter.targets import ENGINE_PREFIX, EngineTarget, LocalTarget, VllmTarget, parse_target

    # Checked whatever the target (only cmd: uses it): a bad value is one line, never ignored.
    wait = None if startup_timeout is None else parse_duration(startup_timeout, "--startup-timeout")
    parsed = parse_target(target) if ENGINE_PREFIX.match(target.strip()) else None
    activity.doing(f"serving {target}")
    if isinstance(parsed, VllmTarget):
        from sagemeter.cli.engines import serve_vllm

        serve_vllm(parsed, port)
        return
    if isinstance(parsed, EngineTarget) and not isinstance(parsed, LocalTarget):
        from sagemeter.cli.engines import serve_engine

        serve_engine(parsed, port, wait)
        return
    if not isinstance(parsed, LocalTarget):
        raise UserError(
            "serve starts a server on this machine; give local:CHECKPOINT, vllm:CHECKPOINT or "
            f'cmd:"COMMAND --port {{port}}", not {target!r}'
        )
    checkpoint = resolve_checkpoint(parsed.checkpoint)
    ctx_per_slot = ctx_per_slot or DEFAULT_CTX_PER_SLOT
    engine = LocalEngine(checkpoint, parallel=parallel, port=port, ctx_per_slot=ctx_per_slot)
    from sagemeter.engines.waiting import wait_line

    what = f"starting {checkpoint.name}"
    with err_console.status(what) as shown:
        engine.start(
            on_wait=lambda seconds: shown.update(escape(wait_line(what, seconds, engine.log_path)))
        )
    serve_until_ctrl_c(
        engine,
        serving=lambda: (
            f"serving {checkpoint.name} at [bold]{engine.base_url}[/] (OpenAI-compatible; "
            f"{parallel} slots of {ctx_per_slot:,} tokens)"
        ),
        log_label="engine log",
        died="the engine stopped unexpectedly",
    )


def register(app: typer.Typer) -> None:
    """Add `checkpoints` and `serve` to the main app."""
    app.command()(checkpoints)
    app.command()(serve)
