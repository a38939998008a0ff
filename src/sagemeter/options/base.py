"""What an options model is: a pydantic model whose every field is one option of a command,
declared once with its type and bounds, its help and how each face spells it.

The faces (the typer command, the plan's table, the MCP tool) are built from these fields by
`sagemeter.options.faces`; nothing in them is copied by hand. A field's metadata `Opt` says which
setting it sets and how the MCP tool names it; `Text` says how the command line (and a plan that
writes it the same way) spells a value that is not a plain number, such as `1,4,16` or `120s`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic.fields import FieldInfo
from pydantic_core import core_schema

from sagemeter.errors import UserError

Face = Literal["cli", "plan", "mcp"]


@dataclass(frozen=True)
class Opt:
    """How one option reaches its faces.

    `setting`: the settings field it sets (None: it is no setting, e.g. `ray`).
    `mcp`: the MCP tool's argument name when it differs from the field's.
    `cli`: the command line's flag when it differs from `--field-name`; `short`: its one-letter
    alias (`-c`).
    `not_on`: faces that leave the option out, each with the reason (said in docs and tests);
    the command line or MCP, as a plan's table is the model itself, except deploy's: its plan
    table `[arm.sagemaker]` is SageMaker's platform's, which takes the model's fields from
    below (`sagemeter.sagemaker.deploy_fields`), and `not_on` "plan" says what it leaves out.
    `unset`: what leaving it out means, when that is not a default value ("the engine's own").
    `envvar`: the environment variable the command line reads it from when the flag is not given.
    `unit`: the unit its help names as `{unit}` (`seconds`); `mcp_unit` and `mcp_scale`: the MCP
    argument's, when it takes the value in another one (`ms`, 1000: milliseconds for seconds).
    `refuse`: what a value out of its bounds (or not one of its words) is told, after the option
    and the value (`--concurrency 0: give 1 to 4096 streams at once`), when the bound's own
    words would say less.
    `positional`: the command line takes it as an argument (`NAME`), not a flag. A field with no
    default is required on every face (a required argument or flag, an MCP argument listed in
    `required`).
    `none`: what None given on purpose means for an option whose default is a value ("leaves it
    to vLLM"): MCP's null, and `cli_none` on the command line (`0`), which has no null. The help
    says it after the option's own words (`; 0 leaves it to vLLM`, `; null leaves it to vLLM`).
    """

    setting: str | None = None
    mcp: str | None = None
    cli: str | None = None
    not_on: tuple[tuple[Face, str], ...] = ()
    unset: str | None = None
    envvar: str | None = None
    unit: str = ""
    mcp_unit: str | None = None
    mcp_scale: float = 1.0
    short: str | None = None
    refuse: str | None = None
    positional: bool = False
    none: str | None = None
    cli_none: int | float | None = None


@dataclass(frozen=True)
class Text:
    """A value the command line writes as text (`1,4,16`, `none`, `120s`), read by `parse(text,
    label)`: the CLI reads its string with it, a plan's string goes through it too (so a plan
    may write what the command line writes), and a JSON value (MCP, a plan's list) passes as is.
    `unit` is appended to a number shown as the command line's default (`120s`)."""

    parse: Callable[[str, str], Any]
    unit: str = ""
    # the rule a value given as JSON keeps too (a list of levels: each once, at most 32)
    check: Callable[[Any, str], None] | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self.read, handler(source))

    def read(self, value: Any) -> Any:
        """A string read by `parse`, a list checked by `check`; a bad one a ValueError naming
        only the problem (pydantic puts it after the key). Anything else passes through."""
        if isinstance(value, list) and self.check is not None:
            try:
                self.check(value, _HERE)
            except UserError as exc:
                raise ValueError(_unlabelled(str(exc), _HERE)) from None
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value, repr(value))
        except UserError as exc:
            raise ValueError(_unlabelled(str(exc), repr(value))) from None


_HERE = "\x00"  # the label of a message whose key pydantic names


def _unlabelled(text: str, label: str) -> str:
    for prefix in (f"{label}: ", f"{label} "):
        text = text.removeprefix(prefix)
    return text


class OptionsModel(BaseModel):
    """The options of one command (or of one of its plan tables). Unset fields are None: they
    keep the settings' default (or the quick or the method's one)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    TABLE: ClassVar[str] = ""  # the plan table that holds these options

    @classmethod
    def options(cls) -> Iterator[Option]:
        for name, info in cls.model_fields.items():
            yield Option(cls, name, info)

    def given(self) -> dict[str, Any]:
        """The settings this model changes: settings field → value (None keeps the default)."""
        return {
            option.setting: getattr(self, option.name)
            for option in self.options()
            if option.setting is not None and option.name not in ("quick", "method")
        }


_MACHINE = 2**63 - 1  # a bound this far out is the integer's size, not the option's


def _number(value: Any) -> str:
    """1 for 1.0; 0.5; 10000 (no exponent)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def taken(model: type[BaseModel], name: str, help: str | None = None, **opt: Any) -> Any:
    """`model`'s option `name` as a field of another model: its type, bounds, text and setting
    declared once, there; `help` when the other command gives it its own words, `opt` changes
    to its `Opt` (`unset=None`). Assigned as the field's default (`= taken(...)`). `model` may
    be a plain model below the options (deploy's settings, which a plan's `[arm.sagemaker]`
    holds too): its field gets the `Opt` made of `opt`."""
    info = model.model_fields[name]
    metadata = [replace(item, **opt) if isinstance(item, Opt) else item for item in info.metadata]
    if not any(isinstance(item, Opt) for item in metadata):
        metadata.append(Opt(**opt))
    described = Field(info.default, description=help or info.description)
    # Annotated[its type, *its bounds and metadata], built at run time
    annotation: Any = operator.getitem(Annotated, (info.annotation, *metadata))
    return FieldInfo.from_annotated_attribute(annotation, described)


@dataclass(frozen=True)
class Option:
    """One field of an options model, as each face spells it."""

    model: type[OptionsModel]
    name: str
    info: FieldInfo

    @property
    def opt(self) -> Opt:
        return next((item for item in self.info.metadata if isinstance(item, Opt)), Opt())

    @property
    def text(self) -> Text | None:
        return next((item for item in self.info.metadata if isinstance(item, Text)), None)

    @property
    def setting(self) -> str | None:
        return self.opt.setting

    @property
    def required(self) -> bool:
        """No default: every face asks for it."""
        return self.info.is_required()

    @property
    def help(self) -> str:
        return self.info.description or ""

    def range_text(self) -> str:
        """The option's bounds as typer shows its own min and max (`1<=x<=256`, `x>0`, an
        integer's `gt=0` as `x>=1`, a duration's with its unit: `0<x<=86400s`); "" for an option
        without any (a 64-bit integer's own limits are none)."""
        from annotated_types import Ge, Gt, Le, Lt

        whole = int in (self.info.annotation, *get_args(self.info.annotation))
        unit = self.text.unit if self.text is not None else ""
        low = high = ""
        bound: Any
        for item in self.info.metadata:
            if isinstance(item, Gt | Ge):
                bound, strict = (item.gt, True) if isinstance(item, Gt) else (item.ge, False)
                if whole and strict:
                    bound, strict = bound + 1, False
                if abs(bound) < _MACHINE:
                    low = f"{_number(bound)}{unit if bound else ''}{'<' if strict else '<='}"
            elif isinstance(item, Lt | Le):
                bound, strict = (item.lt, True) if isinstance(item, Lt) else (item.le, False)
                if whole and strict:
                    bound, strict = bound - 1, False
                if abs(bound) < _MACHINE:
                    high = f"{'<' if strict else '<='}{_number(bound)}{unit if bound else ''}"
        if low and not high:  # `x>=1`, as typer writes a lower bound alone
            value, _, sign = low.partition("<")
            return f"x>{sign}{value}"
        return f"{low}x{high}" if low or high else ""

    def none_spelled(self, face: Face) -> str:
        """How `face` gives None on purpose: the command line's word (`0`), else `null`."""
        if face == "cli" and self.opt.cli_none is not None:
            return f"{self.opt.cli_none:g}"
        return "null"

    def none_given(self, value: Any, face: Face) -> bool:
        """`value` is None given on purpose (not "not given"): the command line's `cli_none`,
        or over MCP a null for an option whose tool default is a value (so a null was sent)."""
        if self.opt.none is None:
            return False
        if face == "cli":
            return value is not None and not isinstance(value, bool) and value == self.opt.cli_none
        return face == "mcp" and value is None and self.info.default is not None

    def unit(self, face: Face) -> str:
        """The unit `face` takes the value in (MCP's own where it has one)."""
        if face == "mcp" and self.opt.mcp_unit is not None:
            return self.opt.mcp_unit
        return self.opt.unit

    def scale(self, face: Face) -> float:
        """What a value in the model's unit is multiplied by on `face` (1000: seconds as ms)."""
        return self.opt.mcp_scale if face == "mcp" else 1.0

    def on(self, face: Face) -> bool:
        return face not in dict(self.opt.not_on)

    def spelled(self, face: Face) -> str:
        """`--load-tokens` (cli), `measure.load_tokens` (plan), `load_max_tokens` (mcp); an
        argument of the command line as its usage writes it (`NAME`)."""
        if face == "cli" and self.opt.positional:
            return self.name.upper()
        if face == "cli":
            return self.opt.cli or "--" + self.name.replace("_", "-")
        if face == "plan":
            return f"{self.model.TABLE}.{self.name}"
        return self.opt.mcp or self.name
