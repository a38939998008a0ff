"""`sagemeter checkpoints` and `sagemeter serve`: the engines sagemeter runs on this machine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.progress import Progress, TaskID
from rich.table import Table

from sagemeter.cli.common import console, err_console, new_progress, serve_until_ctrl_c
from sagemeter.errors import UserError

MAX_SLOTS = 512  # the embedded engine's parallel slots, at most


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
    target: Annotated[str, typer.Argument(help="local:CHECKPOINT or vllm:CHECKPOINT")],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="port on 127.0.0.1 (0 picks a free one)")
    ] = 8080,
    parallel: Annotated[
        int, typer.Option(min=1, max=MAX_SLOTS, help="parallel slots (embedded engine)")
    ] = 16,
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
    from sagemeter.engines.checkpoints import resolve_checkpoint
    from sagemeter.engines.llamacpp import DEFAULT_CTX_PER_SLOT, LocalEngine
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
    ctx_per_slot = ctx_per_slot or DEFAULT_CTX_PER_SLOT
    engine = LocalEngine(checkpoint, parallel=parallel, port=port, ctx_per_slot=ctx_per_slot)
    from sagemeter.engines.waiting import wait_line

    what = f"starting {checkpoint.name}"
    with err_console.status(what) as shown:
        engine.start(
            on_wait=lambda seconds: shown.update(wait_line(what, seconds, engine.log_path))
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


def run_on_local(
    target_text: str, concurrency: int, max_tokens: int, run: Callable[[str], None]
) -> None:
    """`load local:CHECKPOINT`: start the embedded engine with a slot per stream (16 at least,
    512 at most) and measure's context per slot, call `run` with its URL, and stop it whatever
    happens."""
    from sagemeter.engines.checkpoints import resolve_checkpoint
    from sagemeter.engines.endpoints import slot_context
    from sagemeter.engines.llamacpp import DEFAULT_PARALLEL_SLOTS, LocalEngine
    from sagemeter.engines.waiting import wait_line
    from sagemeter.targets import LocalTarget, parse_target

    parsed = parse_target(target_text)
    assert isinstance(parsed, LocalTarget)
    checkpoint = resolve_checkpoint(parsed.checkpoint)
    slots = max(DEFAULT_PARALLEL_SLOTS, min(concurrency, MAX_SLOTS))
    engine = LocalEngine(checkpoint, parallel=slots, ctx_per_slot=slot_context(max_tokens))
    what = f"starting {checkpoint.name}"
    try:
        with err_console.status(what) as shown:
            url = engine.start(
                on_wait=lambda seconds: shown.update(wait_line(what, seconds, engine.log_path))
            )
        err_console.print(
            f"the embedded engine serves {checkpoint.name} at {url} with {slots} slots "
            f"(log {engine.log_path})",
            highlight=False,
            markup=False,
        )
        run(url)
    finally:
        engine.stop()


def register(app: typer.Typer) -> None:
    """Add `checkpoints` and `serve` to the main app."""
    app.command()(checkpoints)
    app.command()(serve)
