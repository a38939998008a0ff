"""The faces built from a command's options models: the typer command's options and the MCP
tool's arguments are added to a function's signature (it takes them as `**options`), and what
either face passes is read back into the options models, checked by their types.

The plan's tables are the options models themselves (`sagemeter.experiment.plan`).
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, cast, get_args, get_origin

from pydantic import Field

from sagemeter.options.base import Face, Option, OptionsModel
from sagemeter.options.command import Command

F = TypeVar("F", bound=Callable[..., Any])


def _bare(annotation: Any) -> Any:
    """`int | None` → int; a Literal → str (the model checks its values)."""
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    if get_origin(annotation) is Literal:
        return str
    return annotation


def cli_type(option: Option) -> Any:
    """What the command line takes: text for a value it writes as text (`1,4,16`, `120s`)."""
    return str if option.text is not None else _bare(option.info.annotation)


def cli_parameter(command: Command, option: Option) -> inspect.Parameter:
    import typer
    from rich.markup import escape

    kind = cli_type(option)
    decls = [option.opt.cli] if option.opt.cli else []
    if option.opt.short is not None:
        decls = [option.spelled("cli"), option.opt.short]
    default = cli_default(command, option)
    help = escape(command.help(option, "cli"))  # `[article-40]` is no markup tag
    shown = command.flag_defaults and default is not None
    info = (
        typer.Argument(help=help, envvar=option.opt.envvar, show_default=shown)
        if option.opt.positional
        else typer.Option(*decls, help=help, envvar=option.opt.envvar, show_default=shown)
    )
    if option.required:  # no default: typer asks for it (`Missing argument 'NAME'`)
        return inspect.Parameter(
            option.name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[kind, info]
        )
    if kind is bool:
        return inspect.Parameter(
            option.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[bool, info],
            default=bool(option.info.default),
        )
    return inspect.Parameter(
        option.name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[kind | None, info],
        default=default,
    )


def cli_default(command: Command, option: Option) -> Any:
    """What the command line starts from: nothing (the settings' default is kept), or, for a
    command whose flags show their own defaults, the option's, as the command line writes it
    (`300s`)."""
    default = option.info.default
    if not command.flag_defaults or default is None or option.required:
        return None
    if option.text is not None:
        return command.shown(option, default, "cli")
    return default


def mcp_parameter(command: Command, option: Option) -> inspect.Parameter:
    """The tool argument: the option's own type and bounds, its help for an assistant."""
    described = Field(description=command.help(option, "mcp"))
    factor = option.scale("mcp")  # its bounds and default in the tool's unit (ms for seconds)
    bounds = [_scaled(item, factor) for item in option.info.metadata]
    # Annotated[type, *bounds, described], built at run time
    annotation = operator.getitem(Annotated, (option.info.annotation, *bounds, described))
    default = option.info.default
    if option.required:  # no default: the tool's schema lists it as required
        default = inspect.Parameter.empty
    elif isinstance(default, int | float) and factor != 1:
        default = default * factor
    kind = inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(option.spelled("mcp"), kind, annotation=annotation, default=default)


def _scaled(item: Any, factor: float) -> Any:
    """A bound (gt, ge, lt, le) times `factor`; anything else as it is."""
    from annotated_types import Ge, Gt, Le, Lt

    bound: Any
    if factor == 1:
        return item
    if isinstance(item, Gt):
        bound = item.gt
        return Gt(bound * factor)
    if isinstance(item, Ge):
        bound = item.ge
        return Ge(bound * factor)
    if isinstance(item, Lt):
        bound = item.lt
        return Lt(bound * factor)
    if isinstance(item, Le):
        bound = item.le
        return Le(bound * factor)
    return item


def read_scaled(option: Option, value: Any, face: Face) -> Any:
    """A value `face` gave (in its unit) in the model's unit: 500 (ms) → 0.5 (seconds)."""
    factor = option.scale(face)
    if factor == 1 or not isinstance(value, int | float) or isinstance(value, bool):
        return value
    return value / factor


def with_options(
    command: Command, face: Face, only: tuple[str, ...] | None = None
) -> Callable[[F], F]:
    """Give `func`, whose last parameter is `**options`, one parameter per option of `command`
    shown on `face` (typer and the MCP server read a function's signature); `only`: just these
    options, by name (the demo's few of measure's)."""
    build = cli_parameter if face == "cli" else mcp_parameter

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        added = [
            build(command, option)
            for option in command.options()
            if option.on(face) and (only is None or option.name in only)
        ]
        made = _same_call(func)  # a new function: `func` stays as written (registered again)
        made.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        made.__annotations__ = {
            **{p.name: p.annotation for p in own},
            **{p.name: p.annotation for p in added},
            "return": signature.return_annotation,
        }
        return cast(F, made)

    return decorate


def _same_call(func: Callable[..., Any]) -> Callable[..., Any]:
    """A function that calls `func` (a coroutine function stays one)."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def waited(*args: Any, **kwargs: Any) -> Any:
            return await func(*args, **kwargs)

        return waited

    @functools.wraps(func)
    def called(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return called


def read_options(
    command: Command, values: Mapping[str, Any], face: Face
) -> tuple[OptionsModel, ...]:
    """What a face passed (its own spellings; None: not given) as the command's options models.

    The command line's text (`1,4,16`, `2m`) is read first with the flag in its message, as the
    command line always said it; then every value is checked by the model's types.
    """
    models = []
    for model in command.models:
        given: dict[str, Any] = {}
        nones: set[str] = set()  # None given on purpose (`--max-model-len 0`, MCP's null)
        for option in model.options():
            if not option.on(face):
                continue
            value = values.get(option.name if face == "cli" else option.spelled(face))
            if option.none_given(value, face):
                value = None
                nones.add(option.name)
            if face == "cli" and isinstance(value, str) and option.text is not None:
                value = option.text.parse(value, option.spelled("cli"))
            if isinstance(value, Path):
                value = str(value)
            given[option.name] = value
        models.append(command.validated(model, given, face, frozenset(nones)))
    return tuple(models)
