"""`combine`'s options, declared once: `sagemeter combine`'s flags and the MCP tool
`compare_results`' arguments are made from these fields (`sagemeter.options.faces`).

What is compared and where it is written are each face's own (the command line's paths, MCP's
names in its results folder, and so each one's `force`, whose help names its own file).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from sagemeter.bounds import MAX_PRICE_PER_HOUR
from sagemeter.limits import check_price
from sagemeter.options.base import Opt, OptionsModel
from sagemeter.options.checked import Checked
from sagemeter.options.command import Command


class CombineOptions(OptionsModel):
    """The price cost rows are made with, and the quality verdict's margin."""

    TABLE: ClassVar[str] = "combine"

    price_per_hour: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_PRICE_PER_HOUR,
            description="USD per instance-hour: adds cost per million tokens",
        ),
        Checked(check_price),
        Opt(),
    ] = None
    margin: Annotated[
        float | None,
        Field(gt=0, le=100, description="quality verdict margin in points"),
        Opt(mcp="margin_points", unset="the one the first result declared, else 2"),
    ] = None


COMBINE = Command(
    "combine",
    models=(CombineOptions,),
    quote_values=True,  # a refusal names the value given, as it always did
)
