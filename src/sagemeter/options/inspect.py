"""`inspect`'s options, declared once: `sagemeter inspect`'s flags and the MCP tool
`inspect_checkpoint`'s arguments are made from these fields (`sagemeter.options.faces`).

The sources are each face's own: the command line takes paths, MCP names in its results folder.
`--json` is the command line's own way of printing.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from sagemeter.inspect.gpus import check_bandwidth
from sagemeter.options.base import Opt, OptionsModel
from sagemeter.options.checked import Checked
from sagemeter.options.command import Command

MAX_BANDWIDTH_GB_S = 1e6  # GB/s: far past any memory (an H200 reads 4,800)


class InspectOptions(OptionsModel):
    """How a checkpoint's decode ceiling is found, and whether its weights' grid is checked."""

    TABLE: ClassVar[str] = "inspect"

    gpu: Annotated[
        str | None,
        Field(
            description="a GPU (L4, T4, A10G, L40S, A100, H100, H200, MI300X) or a SageMaker "
            "instance type, for the decode ceiling"
        ),
        Opt(),
    ] = None
    bandwidth: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_BANDWIDTH_GB_S,
            description="decode ceiling for this memory bandwidth, in GB/s, instead of {gpu}",
        ),
        Checked(check_bandwidth),
        Opt(mcp="bandwidth_gb_s"),
    ] = None
    grid_check: Annotated[
        bool,
        Field(
            description="check from sampled blocks whether 16/32-bit body weights sit on a 4-bit "
            "grid (QAT)"
        ),
        Opt(cli="--grid-check"),  # a flag that only turns it on, as it always was
    ] = False


INSPECT = Command(
    "inspect",
    models=(InspectOptions,),
    quote_values=True,  # a refusal names the value given, as it always did
)
