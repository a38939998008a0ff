"""`sagemeter engines install vllm` and `sagemeter engines list`: the engines sagemeter runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from sagemeter.errors import UserError
from sagemeter.printable import printable

if TYPE_CHECKING:
    from sagemeter.targets import EngineTarget, VllmTarget

engines_app = typer.Typer(
    name="engines",
    help="Engines sagemeter starts itself: install sagemeter's own vLLM, see which one is used.",
    no_args_is_help=True,
)

INSTALLABLE = ("vllm",)
VLLM_STARTING = "starting vLLM (it compiles the model first)"


@engines_app.command("install")
def install_command(
    engine: Annotated[str, typer.Argument(help="the engine to install: vllm")],
    force: Annotated[bool, typer.Option(help="rebuild even when it is already installed")] = False,
    torch_index: Annotated[
        str | None,
        typer.Option(
            help="an extra package index that carries torch's CPU build "
            "(e.g. https://download.pytorch.org/whl/cpu) [pip's own configuration]"
        ),
    ] = None,
) -> None:
    """Install vLLM's CPU build into sagemeter's cache dir (idempotent: quick when present)."""
    from sagemeter.engines.vllm_install import install_vllm

    if engine not in INSTALLABLE:
        raise UserError(f"unknown engine {engine!r}; installable: {', '.join(INSTALLABLE)}")
    # pip's lines are outside text: shown escaped.
    outcome = install_vllm(
        force=force, torch_index=torch_index, echo=lambda line: typer.echo(printable(line))
    )
    where = outcome.install.executable
    if outcome.already:
        typer.echo(f"vllm is already installed: {where} (use --force to rebuild)")
    else:
        typer.echo(f"installed vllm in {outcome.seconds:.0f} s: {where} (log {outcome.log_path})")


@engines_app.command("list")
def list_command() -> None:
    """Say which `vllm` a vllm: target would run, and where it was found."""
    from sagemeter.engines.vllm_install import INSTALL_HINT, find_vllm, managed_dir

    found = find_vllm()
    if found is None:
        typer.echo(f"vllm: not installed; {INSTALL_HINT}")
        return
    typer.echo(f"vllm: {found.executable} (from {found.origin}; Python {found.python})")
    typer.echo(f"sagemeter's own environment lives in {managed_dir()}")


def register(app: typer.Typer) -> None:
    """Add `sagemeter engines install|list` to the main app."""
    app.add_typer(engines_app)


def serve_vllm(target: VllmTarget, port: int) -> None:
    """`sagemeter serve vllm:CHECKPOINT`: vLLM in the foreground until Ctrl-C, then stopped."""
    from rich.markup import escape

    from sagemeter.cli.common import err_console, serve_until_ctrl_c
    from sagemeter.engines.vllm_server import check_vllm_target, prepare_server
    from sagemeter.engines.waiting import wait_line

    check_vllm_target(target.checkpoint)
    with err_console.status(f"preparing {target.checkpoint} for vLLM (exported once, then cached)"):
        server = prepare_server(target.checkpoint, port=port)

    def start() -> None:
        with err_console.status(VLLM_STARTING) as shown:
            server.start(
                on_wait=lambda seconds: shown.update(
                    escape(wait_line(VLLM_STARTING, seconds, server.log_path))
                )
            )

    serve_until_ctrl_c(
        server,
        start=start,
        serving=lambda: (
            f"serving {server.model.name} at [bold]{server.base_url}[/] (vLLM, OpenAI-compatible)"
        ),
        log_label="vLLM log",
        died="vLLM stopped unexpectedly",
    )


def run_on_engine(
    target_text: str,
    max_tokens: int,
    concurrency: int,
    run: Callable[[str], None],
    startup_timeout_s: float | None = None,
    api_key: str | None = None,
) -> None:
    """Start the server an engine target names (local:, vllm:, cmd:, a plug-in's), call `run`
    with its URL, and stop it whatever happens."""
    from rich.markup import escape

    from sagemeter.engine_registry import StartRequest, engine_of
    from sagemeter.engines.endpoints import WireOptions
    from sagemeter.printable import SafeConsole
    from sagemeter.targets import EngineTarget, parse_target

    parsed = parse_target(target_text)
    assert isinstance(parsed, EngineTarget)
    engine = engine_of(parsed)
    engine.check(parsed)
    status = SafeConsole(stderr=True)
    with contextlib.ExitStack() as stack:
        with status.status(f"starting {parsed.default_name}") as shown:
            request = StartRequest(
                concurrency=concurrency,
                max_reply_tokens=max_tokens,
                startup_timeout_s=startup_timeout_s,
                wire=WireOptions(api_key=api_key),
                on_wait=lambda line: shown.update(escape(line)),
            )
            server = stack.enter_context(engine.serving(parsed, request))
        assert server.base_url is not None
        status.print(f"{parsed.default_name} serves at {server.base_url} (log {server.log_path})")
        run(server.base_url)


def serve_engine(target: EngineTarget, port: int, startup_timeout_s: float | None) -> None:
    """`sagemeter serve ENGINE:SPEC` for an engine other than local: and vllm: (cmd:, a
    plug-in's): started on `port`, held until Ctrl-C or until it dies, then stopped."""
    from rich.markup import escape

    from sagemeter.cli.common import err_console, serve_until_ctrl_c
    from sagemeter.engine_registry import StartRequest, engine_of

    engine = engine_of(target)
    engine.check(target)
    with contextlib.ExitStack() as stack:
        with err_console.status(f"starting {target.default_name}") as shown:
            request = StartRequest(
                port=port,
                startup_timeout_s=startup_timeout_s,
                on_wait=lambda line: shown.update(escape(line)),
            )
            server = stack.enter_context(engine.serving(target, request))
        serve_until_ctrl_c(
            server,
            serving=lambda: f"serving {target.default_name} at [bold]{server.base_url}[/]",
            log_label="engine log",
            died=f"{target.default_name} stopped unexpectedly",
        )
