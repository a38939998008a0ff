"""`sagemeter questions list|show`: see what a question set asks before a measurement spends
minutes asking it (thin face over `sagemeter.questions`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from sagemeter.errors import UserError

DEFAULT_LIMIT = 20


def register(app: typer.Typer) -> None:
    """Add the `questions` command group to the main CLI."""
    questions_app = typer.Typer(
        help="Built-in and user question sets: what they ask and how each answer is scored.",
        no_args_is_help=True,
    )

    @questions_app.command("list")
    def list_sets() -> None:
        """List the built-in question sets: name, items, families."""
        from rich.console import Console
        from rich.table import Table

        from sagemeter.questions import builtin_sets, family_counts, load_question_set

        table = Table(title="built-in question sets (use with --questions NAME)")
        table.add_column("name")
        table.add_column("items", justify="right")
        table.add_column("families", justify="right")
        table.add_column("family (items)")
        for name in builtin_sets():
            question_set = load_question_set(name)
            counts = family_counts(question_set)
            table.add_row(
                name,
                str(len(question_set.questions)),
                str(len(counts)),
                ", ".join(f"{family} ({count})" for family, count in counts.items()),
            )
        Console().print(table)

    @questions_app.command("show")
    def show(
        name: Annotated[str, typer.Argument(help="a built-in set name or a JSONL file")],
        family: Annotated[str | None, typer.Option(help="only this family")] = None,
        limit: Annotated[
            int, typer.Option(help="show at most N items (0 shows all)", metavar="N")
        ] = DEFAULT_LIMIT,
    ) -> None:
        """Print a set's items: id, family, scoring rule, prompt and expected answer."""
        from rich.console import Console
        from rich.table import Table

        from sagemeter.questions import family_counts, load_question_set
        from sagemeter.questions.scoring import answer_kind

        if limit < 0:
            raise UserError(f"--limit {limit}: give 0 (all) or a positive number")
        question_set = load_question_set(name)
        questions = question_set.questions
        if family is not None:
            counts = family_counts(question_set)
            if family not in counts:
                raise UserError(
                    f"question set {question_set.name} has no family {family!r}; "
                    f"its families: {', '.join(counts)}"
                )
            questions = [q for q in questions if q.family == family]
        shown = questions if limit == 0 else questions[:limit]
        table = Table(
            title=f"{question_set.name}: {len(shown)} of {len(questions)} items"
            f" (sha256 {question_set.sha256[:12]})"
        )
        for column in ("id", "family", "scored as", "prompt", "answer"):
            table.add_column(column)
        for question in shown:
            table.add_row(
                question.id,
                question.family,
                answer_kind(question),
                question.prompt,
                question.answer,
            )
        Console().print(table)

    app.add_typer(questions_app, name="questions")
