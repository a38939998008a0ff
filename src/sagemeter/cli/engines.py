"""`sagemeter engines install vllm` and `sagemeter engines list`: the engines sagemeter runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from sagemeter.errors import UserError
from sagemeter.printable import printable

if TYPE_CHECKING:
    from sagemeter.engine_registry import Engine
    from sagemeter.options.serve import ServeOptions
    from sagemeter.targets import EngineTarget

engines_app = typer.Typer(
    name="engines",
    help="Engines sagemeter starts itself: install sagemeter's own vLLM, see which one is used.",
    no_args_is_help=True,
)

INSTALLABLE = ("vllm",)


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


def serve_target(text: str, port: int, given: ServeOptions) -> None:
    """`sagemeter serve ENGINE:SPEC` for every engine (local:, vllm:, cmd:, a plug-in's), all
    through the registry: started on `port`, held until Ctrl-C or until it dies, then stopped."""
    from rich.markup import escape

    from sagemeter.cli import interrupt as activity
    from sagemeter.cli.common import err_console, serve_until_ctrl_c
    from sagemeter.engine_registry import StartRequest, serve_words

    engine, target = _engine_target(text)
    engine.check(target)
    activity.doing(f"serving {text}")
    with contextlib.ExitStack() as stack:
        with err_console.status(escape(f"starting {target.default_name}")) as shown:
            request = StartRequest(
                port=port,
                startup_timeout_s=given.startup_timeout,
                slots=given.parallel,
                ctx_per_slot=given.ctx_per_slot,
                on_status=lambda line: shown.update(escape(line)),
                on_wait=lambda line: shown.update(escape(line)),
            )
            server = stack.enter_context(engine.serving(target, request))
        words = serve_words(engine, target, server)
        detail = f" {escape(words.detail)}" if words.detail else ""
        serve_until_ctrl_c(
            server,
            serving=lambda: f"serving {escape(words.name)} at [bold]{server.base_url}[/]{detail}",
            log_label=words.log_label,
            died=words.died_line,
        )


def _engine_target(text: str) -> tuple[Engine, EngineTarget]:
    """The engine a target names by its prefix and its target, parsed by that engine; anything
    else (a URL, an endpoint) is one line: serve starts servers, it measures none."""
    from sagemeter.engine_registry import ENGINE_PREFIX, engine_named
    from sagemeter.targets import parse_target

    prefix = ENGINE_PREFIX.match(text.strip())
    engine = engine_named(prefix.group(1)) if prefix else None
    if prefix is None or engine is None:
        if prefix is not None:
            parse_target(text)  # an engine not installed: its one line ("no engine is called")
        raise UserError(
            "serve starts a server on this machine; give local:CHECKPOINT, vllm:CHECKPOINT or "
            f'cmd:"COMMAND --port {{port}}", not {text!r}'
        )
    return engine, engine.parse(prefix.group(2).strip(), text)
