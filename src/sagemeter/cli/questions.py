"""`sagemeter questions list|show`: see what a question set asks before a measurement spends
minutes asking it (thin face over `sagemeter.questions`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sagemeter.errors import UserError
from sagemeter.printable import printable_json
from sagemeter.redaction import redact_tree

if TYPE_CHECKING:
    from sagemeter.questions import Question, QuestionSet

DEFAULT_LIMIT = 20  # rows of the table; --json prints every item unless --limit says otherwise


def register(app: typer.Typer) -> None:
    """Add the `questions` command group to the main CLI."""
    questions_app = typer.Typer(
        help="Built-in and user question sets: what they ask and how each answer is scored.",
        no_args_is_help=True,
    )

    @questions_app.command("list")
    def list_sets() -> None:
        """List the built-in question sets: name, items, families."""
        from rich.table import Table

        from sagemeter.printable import SafeConsole
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
        SafeConsole().print(table)

    @questions_app.command("show")
    def show(
        name: Annotated[str, typer.Argument(help="a built-in set name or a JSONL file")],
        family: Annotated[str | None, typer.Option(help="only this family")] = None,
        limit: Annotated[
            int | None,
            typer.Option(
                help=f"show at most N items (0 shows all) [table {DEFAULT_LIMIT}, --json all]",
                metavar="N",
            ),
        ] = None,
        as_json: Annotated[
            bool,
            typer.Option(
                "--json", help='print {"name", "sha256", "provenance", "items": [...]} as JSON'
            ),
        ] = False,
    ) -> None:
        """Print a set's items: id, family, scoring rule, prompt and expected answer."""
        from sagemeter.questions import load_question_set

        if limit is not None and limit < 0:
            raise UserError(f"--limit {limit}: give 0 (all) or a positive number")
        question_set = load_question_set(name)
        questions = _family_items(question_set, family)
        count = limit if limit is not None else (0 if as_json else DEFAULT_LIMIT)
        shown = questions if count == 0 else questions[:count]
        if as_json:
            payload = redact_tree(set_payload(question_set, shown))
            typer.echo(printable_json(json.dumps(payload, indent=2, ensure_ascii=False)))
        else:
            _print_table(question_set, shown, len(questions))

    app.add_typer(questions_app, name="questions")


def _family_items(question_set: QuestionSet, family: str | None) -> list[Question]:
    """The set's items, or one family's (an unknown family names the set's families)."""
    from sagemeter.questions import family_counts

    if family is None:
        return list(question_set.questions)
    counts = family_counts(question_set)
    if family not in counts:
        raise UserError(
            f"question set {question_set.name} has no family {family!r}; "
            f"its families: {', '.join(counts)}"
        )
    return [q for q in question_set.questions if q.family == family]


def set_payload(question_set: QuestionSet, shown: list[Question]) -> dict[str, Any]:
    """What `show --json` prints: the set's identity, provenance and items, scoring keys last."""
    from sagemeter.questions.scoring import answer_kind

    items = []
    for question in shown:
        item: dict[str, Any] = {
            "id": question.id,
            "family": question.family,
            "prompt": question.prompt,
            "answer": question.answer,
            "scored_as": answer_kind(question),
        }
        if question.pattern is not None:
            item["pattern"] = question.pattern
        items.append(item)
    return {
        "name": question_set.name,
        "sha256": question_set.sha256,
        "provenance": question_set.provenance,
        "items": items,
    }


def _print_table(question_set: QuestionSet, shown: list[Question], of: int) -> None:
    from rich.table import Table

    from sagemeter.printable import SafeConsole, printable
    from sagemeter.questions.scoring import answer_kind

    table = Table(
        title=f"{question_set.name}: {len(shown)} of {of} items (sha256 {question_set.sha256[:12]})"
    )
    for column in ("id", "family", "scored as", "prompt", "answer"):
        table.add_column(column)
    for question in shown:
        cells = (question.id, question.family, answer_kind(question), question.prompt)
        table.add_row(*(printable(cell) for cell in (*cells, question.answer)))
    SafeConsole().print(table)
