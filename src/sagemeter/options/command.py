"""A command's options models, its settings, and what every face shows of them: each option's
spelling, its help (other options named as the face names them) and its default (the settings'
own, and where the quick settings or a method differ, those too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from sagemeter.errors import SETTING_NAME, InputError, SettingsError, UserError
from sagemeter.options.base import Face, Option, OptionsModel

# The errors of a value past a bound, not finite, or not one of an option's words: what
# `Opt.refuse` answers.
OUT_OF_BOUNDS = frozenset(
    {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "finite_number",
        "literal_error",
    }
)


@dataclass(frozen=True)
class Variant:
    """Defaults that differ when an option has a value: `quick` on, `method` article."""

    option: str
    value: Any
    settings: Callable[[], BaseModel]


@dataclass(frozen=True)
class Command:
    """One command's options: its models (a plan table each), the settings they make.

    `defaults`: the settings whose values an unset option keeps (None: each option's own
    default is the command's). `flag_defaults`: the command line shows an option's own default
    as typer does (`[default: 16]`) and starts from it. `quote_values`: a refusal names the value
    after the option (`--max-tokens 0: …`), as the command always said it.
    """

    name: str
    models: tuple[type[OptionsModel], ...]
    defaults: Callable[[], BaseModel] | None = None
    # (quick, settings overrides, method, label) → the settings, validated
    build: Callable[..., Any] | None = None
    variants: tuple[Variant, ...] = ()
    flag_defaults: bool = False
    quote_values: bool = False

    def options(self) -> Iterator[Option]:
        for model in self.models:
            yield from model.options()

    def option(self, name: str) -> Option:
        return next(option for option in self.options() if option.name == name)

    def label(self, face: Face) -> Callable[[str], str]:
        """A settings field (or an option's name) as `face` spells it, for messages."""
        by_setting = {option.setting: option for option in self.options() if option.setting}
        by_name = {option.name: option for option in self.options()}

        def spelled(field: str) -> str:
            option = by_setting.get(field) or by_name.get(field)
            return option.spelled(face) if option is not None else field

        return spelled

    def spell(self, text: str, face: Face) -> str:
        """A message's `{setting}` names (a settings field or an option's name) as `face` spells
        them: `{rate}` is `--rate` on the command line, `slo.rate` in a plan. Braces around
        any other word are left as they are."""
        label = self.label(face)
        known = {option.setting for option in self.options()} | {o.name for o in self.options()}
        return SETTING_NAME.sub(
            lambda match: label(match[1]) if match[1] in known else match[0], text
        )

    @contextmanager
    def spelling(self, face: Face) -> Iterator[None]:
        """Settings that do not go together (`SettingsError`), said with `face`'s names."""
        try:
            yield
        except SettingsError as exc:
            raise InputError(SETTING_NAME.sub(r"\1", self.spell(exc.template, face))) from None

    def help(self, option: Option, face: Face) -> str:
        """The option's help with `{other}` names spelled for `face`, what None given on purpose
        means (`; 0 leaves it to vLLM`), and its default."""
        label = self.label(face)
        text = option.help.replace("{unit}", option.unit(face))
        if option.opt.none is not None:
            text = f"{text}; {option.none_spelled(face)} {option.opt.none}"
        default = self.default_text(option, face)
        if default:
            text = f"{text} [{default}]" if face == "cli" else f"{text} (default: {default})"
        bounds = option.range_text() if face == "cli" else ""  # MCP's schema holds its bounds
        if bounds:
            text = f"{text} [{bounds}]"
        return re.sub(r"\{(\w+)\}", lambda match: label(match[1]), text)

    def default_text(self, option: Option, face: Face) -> str:
        """`16`; `256,4096; none with --quick; none with --method article`; the unset text."""
        if option.info.default is not None:
            return ""  # a flag's own default (quick: false), which every face shows itself
        if option.setting is None or self.defaults is None:
            return option.opt.unset or ""
        base = self.default_value(option)
        parts = [self.shown(option, base, face)]
        for variant in self.variants:
            value = getattr(variant.settings(), option.setting)
            if value != base and option.name != variant.option:
                spelled = self.option(variant.option).spelled(face)
                when = spelled if variant.value is True else f"{spelled} {variant.value}"
                parts.append(f"{self.shown(option, value, face)} with {when}")
        return "; ".join(parts)

    def default_value(self, option: Option) -> Any:
        assert option.setting is not None and self.defaults is not None
        return getattr(self.defaults(), option.setting)

    def shown(self, option: Option, value: Any, face: Face) -> str:
        if value is None:
            return option.opt.unset or "none"
        if isinstance(value, list):
            if face != "cli":
                return json.dumps(value)
            return ",".join(map(str, value)) if value else "none"
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, float):
            unit = option.text.unit if option.text is not None and face == "cli" else ""
            return f"{value:g}{unit}"
        return str(value)

    def validated(
        self,
        model: type[OptionsModel],
        values: Mapping[str, Any],
        face: Face,
        nones: frozenset[str] = frozenset(),
    ) -> OptionsModel:
        """`values` (option name → value, None: unset, except for the options in `nones`, whose
        None was given on purpose) as `model`; a bad one is one line naming the option as `face`
        spells it."""
        try:
            return model.model_validate(
                {
                    name: value
                    for name, value in values.items()
                    if value is not None or name in nones
                }
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else ""
            where = self.label(face)(name) if name else model.TABLE
            refuse = next((o.opt.refuse for o in model.options() if o.name == name), None)
            if refuse is not None and first["type"] in OUT_OF_BOUNDS:
                raise UserError(f"{where} {first['input']!r}: {refuse}") from None
            if first["type"] == "literal_error":  # one of a few words: name them all
                expected = str(first.get("ctx", {}).get("expected", ""))
                choices = expected.replace("'", "").replace(" or ", ", ")
                raise UserError(f"{where} {first['input']!r}: give one of {choices}") from None
            message = str(first["msg"]).removeprefix("Value error, ")
            spelled = self.spell(message, face)  # options that do not go together: `{rate}`
            if spelled != message:
                raise UserError(spelled) from None
            if self.quote_values and name:
                raise UserError(f"{where} {first['input']!r}: {message}") from None
            raise UserError(f"{where}: {message}") from None

    def settings(
        self, given: Sequence[OptionsModel], face: Face, *, quick: bool, method: str | None
    ) -> Any:
        """The settings the given options make, each message naming its option as `face` does."""
        overrides: dict[str, Any] = {}
        for model in given:
            overrides.update(model.given())
        assert self.build is not None, f"{self.name}'s options make no settings object"
        return self.build(quick, overrides, method=method, label=self.label(face))
