"""`sagemeter combine`: the article's comparison table for result files (or merged load shards)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sagemeter.cli.common import console, err_console
from sagemeter.errors import EXIT_INCOMPLETE
from sagemeter.printable import printable


def combine(
    out: Annotated[Path, typer.Argument(help="where to write the comparison JSON")],
    files: Annotated[list[Path], typer.Argument(help="two or more measure-*.json files, A first")],
    force: Annotated[bool, typer.Option(help="replace OUT if it already exists")] = False,
    **options: Any,
) -> None:
    """Print the article's comparison table for two or more result files and write it as JSON.

    Given the shard files of `sagemeter load --shard i/n`, it merges them into one load result.
    """
    from sagemeter import filekinds
    from sagemeter.atomic import check_output_file
    from sagemeter.cli.load import merge_shard_files
    from sagemeter.options.combine import COMBINE, CombineOptions
    from sagemeter.options.faces import read_options

    (given,) = read_options(COMBINE, options, "cli")  # checked before any file is read
    assert isinstance(given, CombineOptions)
    # What OUT will hold decides what it may replace (with --force): a comparison only a
    # comparison, a merge only a merge; a measurement or a shard never (OUT left out).
    shards = bool(files) and filekinds.kind_of_file(files[0]) in (filekinds.SHARD, filekinds.LOAD)
    kind = filekinds.LOAD if shards else filekinds.COMPARISON
    check_output_file(out, "OUT", force=force, inputs=files, kind=kind)
    if shards:
        merge_shard_files(out, list(files), force=force)
        return
    from sagemeter.compare import combine as build
    from sagemeter.compare import save_comparison
    from sagemeter.report.terminal import print_comparison

    comparison = build(list(files), price_per_hour=given.price_per_hour, margin_points=given.margin)
    print_comparison(console, comparison)
    save_comparison(comparison, out)
    console.print(f"wrote {out}")
    missing = [
        name for name, why in zip(comparison.names, comparison.incomplete, strict=False) if why
    ]
    if missing or comparison.quality_not_compared:  # written, but a figure asked for is missing
        said = [f"{', '.join(missing)} incomplete (said above)"] if missing else []
        said += comparison.quality_not_compared
        err_console.print(f"incomplete: {printable('; '.join(said))}", highlight=False)
        raise typer.Exit(EXIT_INCOMPLETE)


def register(app: typer.Typer) -> None:
    """Add `combine` to the main app, its options made from combine's options model."""
    from sagemeter.options.combine import COMBINE
    from sagemeter.options.faces import with_options

    app.command()(with_options(COMBINE, "cli")(combine))
