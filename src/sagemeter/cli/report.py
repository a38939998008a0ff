"""`sagemeter report`: a run folder's comparison as markdown, HTML and PNG plots (thin face over
`sagemeter.report.writer`, which `demo` and the MCP server call too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sagemeter.errors import UserError


def register(app: typer.Typer) -> None:
    """Add the `report` command to the main CLI."""

    @app.command()
    def report(
        run_dirs: Annotated[
            list[Path],
            typer.Argument(
                help="a run folder (two with --compare), or a `load --out` result file or a "
                "folder of them",
                metavar="RUN_DIR",
                show_default=False,
            ),
        ],
        compare: Annotated[
            bool, typer.Option("--compare", help="two run folders side by side")
        ] = False,
        format: Annotated[
            str, typer.Option("--format", help="any of md,html,png, comma-separated")
        ] = "md,html,png",
        price_per_hour: Annotated[
            float | None,
            typer.Option(help="USD per instance-hour [the price in compare.json, if any]"),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(help="with --compare: output folder [FIRST/compare-SECOND]"),
        ] = None,
    ) -> None:
        """Write report.md, report.html and plots/*.png for a run folder (or compare two).

        A `load` result file FILE.json gets FILE-report.md, FILE-report.html and FILE-plots/
        beside it; a folder of load results (no measure-*.json) gets one report over them all.
        """
        from sagemeter.atomic import check_output_folder
        from sagemeter.printable import SafeConsole
        from sagemeter.report.writer import write_compare_report, write_report

        if not compare and len(run_dirs) == 1:
            from sagemeter.report.load_writer import load_result_paths, write_load_report

            files = load_result_paths(run_dirs[0])
            if files is not None:
                if out is not None:
                    raise UserError("--out is for --compare; a load report goes beside its files")
                folder = run_dirs[0] if run_dirs[0].is_dir() else run_dirs[0].parent
                check_output_folder(folder, "RUN_DIR")
                console = SafeConsole()
                for path in write_load_report(run_dirs[0], files, format):
                    console.print(f"wrote {path}", highlight=False)
                return
        if out is not None:
            check_output_folder(out, "--out")
        elif run_dirs and run_dirs[0].is_dir():
            check_output_folder(run_dirs[0], "RUN_DIR")
        if compare:
            if len(run_dirs) != 2:
                raise UserError(f"--compare takes two run folders, got {len(run_dirs)}")
            written = write_compare_report(
                run_dirs[0], run_dirs[1], format, out_dir=out, price_per_hour=price_per_hour
            )
        else:
            if len(run_dirs) != 1:
                raise UserError(f"give one run folder (or --compare with two), got {len(run_dirs)}")
            if out is not None:
                raise UserError("--out is for --compare; a run's report goes into its folder")
            written = write_report(
                run_dirs[0],
                format,
                price_per_hour=price_per_hour,
                note=lambda line: SafeConsole().print(
                    f"note: {line}", highlight=False, soft_wrap=True
                ),
            )
        console = SafeConsole()
        for path in written:
            console.print(f"wrote {path}", highlight=False)
        _exit_if_incomplete(run_dirs, price_per_hour)


def _exit_if_incomplete(run_dirs: list[Path], price_per_hour: float | None) -> None:
    """Exit 3 (after the files are written) when a result the report shows is incomplete: the
    report marks it, and a script must not take the report for a whole one."""
    from sagemeter.cli.common import err_console
    from sagemeter.errors import EXIT_INCOMPLETE
    from sagemeter.printable import printable
    from sagemeter.report.runs import load_run

    missing = []
    for folder in run_dirs:
        run = load_run(folder, price_per_hour=price_per_hour)
        for result, path in zip(run.results, run.paths, strict=False):
            if result.complete is False:
                missing.append(result.name or path.name)
    if missing:
        shown = printable(", ".join(missing))
        err_console.print(
            f"incomplete: {shown} (the report marks what is missing)", highlight=False
        )
        raise typer.Exit(EXIT_INCOMPLETE)
