"""`sagemeter combine`: the article's comparison table for result files (or merged load shards)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sagemeter.cli.common import console, err_console
from sagemeter.errors import EXIT_INCOMPLETE, UserError
from sagemeter.printable import printable


def combine(
    out: Annotated[Path, typer.Argument(help="where to write the comparison JSON")],
    files: Annotated[list[Path], typer.Argument(help="two or more measure-*.json files, A first")],
    price_per_hour: Annotated[float | None, typer.Option(help="USD per instance-hour")] = None,
    margin: Annotated[
        float | None,
        typer.Option(help="quality verdict margin in points [the one A declared, else 2]"),
    ] = None,
    force: Annotated[bool, typer.Option(help="replace OUT if it already exists")] = False,
) -> None:
    """Print the article's comparison table for two or more result files and write it as JSON.

    Given the shard files of `sagemeter load --shard i/n`, it merges them into one load result.
    """
    from sagemeter.atomic import check_output_file
    from sagemeter.cli.load import is_load_result, merge_shard_files

    _refuse_result_as_out(out)
    check_output_file(out, "OUT", force=force, inputs=files)
    if files and is_load_result(files[0]):
        merge_shard_files(out, list(files), force=force)
        return
    from sagemeter.compare import combine as build
    from sagemeter.compare import save_comparison
    from sagemeter.report.terminal import print_comparison

    comparison = build(list(files), price_per_hour=price_per_hour, margin_points=margin)
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


def _refuse_result_as_out(out: Path) -> None:
    """OUT comes first: a measurement there means OUT was left out, and it would be replaced
    by the comparison (even with --force, that is never what was meant)."""
    import json

    if out.is_symlink() or not out.is_file():
        return  # check_output_file says what is wrong with it, without reading a FIFO
    try:
        payload = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    keys = ("decode_tokens_per_second", "load_tokens_per_second")
    if isinstance(payload, dict) and (is_result_kind(payload) or any(k in payload for k in keys)):
        raise UserError(
            f"OUT {out}: is a result file, not a comparison; give the comparison's new file "
            "name first (sagemeter combine OUT A.json B.json ...)"
        )


def is_result_kind(payload: dict[str, object]) -> bool:
    """A `sagemeter load` result (its `kind`) or one of the article's measurement files."""
    from sagemeter.loadgen.result import RESULT_KIND
    from sagemeter.results.article import is_article_shape

    return payload.get("kind") == RESULT_KIND or is_article_shape(payload)


def register(app: typer.Typer) -> None:
    """Add `combine` to the main app."""
    app.command()(combine)
