"""`sagemeter inspect`: what a checkpoint stores and the decode speed that follows (a thin face
over `sagemeter.inspect`, which the MCP tool `inspect_checkpoint` calls too).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from sagemeter.printable import printable_json
from sagemeter.redaction import redact_tree


def inspect(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="a .safetensors file or folder, a .gguf file, local:NAME, vllm:NAME or "
            "hf:ORG/NAME[@REVISION]; the first is the reference of the predicted ratios",
            metavar="SOURCE...",
            show_default=False,
        ),
    ],
    json_output: Annotated[
        bool, typer.Option("--json", help="print the facts as JSON instead of tables")
    ] = False,
    **options: Any,
) -> None:
    """Read checkpoint headers (never the weights): tensor groups, storage, bytes per token."""
    from rich.table import Table

    from sagemeter.inspect.build import inspect_sources
    from sagemeter.inspect.text import (
        facts_lines,
        group_header,
        group_rows,
        ratio_lines,
        title,
    )
    from sagemeter.options.faces import read_options
    from sagemeter.options.inspect import INSPECT, InspectOptions
    from sagemeter.printable import SafeConsole

    (given,) = read_options(INSPECT, options, "cli")  # checked before any header is read
    assert isinstance(given, InspectOptions)
    report = inspect_sources(
        sources, gpu=given.gpu, bandwidth_gb_s=given.bandwidth, check_grid=given.grid_check
    )
    console = SafeConsole()
    if json_output:
        payload = (
            report.checkpoints[0].model_dump(mode="json")
            if len(report.checkpoints) == 1
            else report.model_dump(mode="json")
        )
        print(printable_json(json.dumps(redact_tree(payload), indent=2)))
        return
    for facts in report.checkpoints:
        console.print(title(facts), highlight=False, markup=False)
        table = Table(show_edge=False)
        for index, column in enumerate(group_header(facts)):
            table.add_column(column, justify="right" if index in (1, 2, 3) else "left")
        for row in group_rows(facts):
            table.add_row(*row)
        console.print(table)
        for line in facts_lines(facts):
            console.print(f"  {line}", highlight=False, markup=False)
    for line in ratio_lines(report):
        console.print(line, highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add the `inspect` command to the main CLI, its options made from inspect's options model."""
    from sagemeter.options.faces import with_options
    from sagemeter.options.inspect import INSPECT

    app.command()(with_options(INSPECT, "cli")(inspect))
