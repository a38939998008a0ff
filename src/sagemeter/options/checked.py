"""A rule an option's value keeps on every face, said in the domain's words: `Checked(check)`
in a field's metadata runs `check(value, label)` (a library's own check, such as
`sagemeter.limits.check_price`) before the field's bounds, so the command line and an MCP tool
refuse a bad price with the same sentence ("give a positive number of USD up to 10,000"), each
naming the option as it spells it. The bounds stay in the field, so the schemas still show them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from sagemeter.errors import UserError

_LABEL = "\x00"  # the label a check is given: its message's, taken off (each face names its own)


@dataclass(frozen=True)
class Checked:
    """`check(value, label)` raises UserError for a number the option refuses."""

    check: Callable[[float, str], None]

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self.read, handler(source))

    def read(self, value: Any) -> Any:
        """A number checked (its message without the check's label, as pydantic names the
        option); anything else is left to the field's own type and bounds."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                self.check(value, _LABEL)
            except UserError as exc:
                text = str(exc)
                if text.startswith(_LABEL):
                    text = text.split(": ", 1)[-1]
                raise ValueError(text) from None
        return value
