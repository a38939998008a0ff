"""The comparison and its verdict as a few plain lines, and the families as a markdown table.

Pure text, so the CLI, the MCP server and the reports print the same words.
"""

from __future__ import annotations

from sagemeter.evidence.binomial import p_text
from sagemeter.evidence.comparison import Accuracy, FamilyRow, QualityComparison
from sagemeter.evidence.verdict import QualityVerdict

MAX_IDS = 6


def _accuracy(name: str, acc: Accuracy, level: float) -> str:
    return (
        f"{name}: {acc.correct}/{acc.total} = {acc.share:.1%} "
        f"({level:.0%} CI {acc.low:.1%}–{acc.high:.1%})"
    )


def _ids(ids: list[str]) -> str:
    if not ids:
        return ""
    shown = ", ".join(ids[:MAX_IDS])
    more = f" and {len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else ""
    return f" ({shown}{more})"


def _source(source: str, names: tuple[str, str]) -> str:
    a, b = names
    where = {"observed": f"{a} vs {b}", "noise floor": f"{a} vs {a} again"}
    return f"from {where[source]}" if source in where else f"the {source}"


def render_summary(
    comparison: QualityComparison,
    verdict: QualityVerdict,
    names: tuple[str, str] = ("A", "B"),
) -> str:
    """A few lines: accuracies, the paired difference, flips, agreement, verdict, items needed."""
    a, b = names
    c, d = comparison, comparison.difference
    families = "1 family" if d.families == 1 else f"{d.families} families"
    lines = [
        f"quality on {c.n} questions both answered ({a} = reference, {b} = candidate)",
        "  " + _accuracy(a, c.accuracy_a, c.level),
        "  " + _accuracy(b, c.accuracy_b, c.level),
        f"  {b} − {a}: {d.estimate_points + 0.0:+.1f} points ({c.level:.0%} CI "
        f"{d.low_points:+.1f} to {d.high_points:+.1f}, clustered by {families})",
        f"  flips: {len(c.flips.losses)} lost{_ids(c.flips.losses)}, "
        f"{len(c.flips.gains)} gained{_ids(c.flips.gains)}; "
        f"exact McNemar {p_text(c.mcnemar_p)}",
        f"  agreement: {c.agreement.identical_replies}/{c.agreement.n} replies identical, "
        f"{c.agreement.identical_extracted}/{c.agreement.n} extracted answers equal",
    ]
    if c.noise is not None:
        noise = c.noise
        lines.append(
            f"  noise floor ({a} vs {a} again): "
            f"{len(noise.flips.losses) + len(noise.flips.gains)} flips on {noise.n} questions, "
            f"{noise.agreement.identical_replies}/{noise.n} replies identical"
        )
    unmatched = len(c.only_in_a) + len(c.only_in_b)
    if unmatched:
        lines.append(
            f"  not compared: {len(c.only_in_a)} only in {a}{_ids(c.only_in_a)}, "
            f"{len(c.only_in_b)} only in {b}{_ids(c.only_in_b)}"
        )
    for name, failed in ((a, c.failed_a), (b, c.failed_b)):
        if failed:
            lines.append(
                f"  unanswered in {name}: {len(failed)}{_ids(failed)} (requests failed; left "
                "out of every figure above, not scored wrong)"
            )
    lines.append(
        f"verdict at a {verdict.margin_points:g}-point margin: {verdict.verdict}: {verdict.reason}"
    )
    if verdict.verdict == "INCONCLUSIVE":
        rough = (
            f"; rough at {c.n} questions, and the exact test needs at least "
            f"{verdict.min_flips_for_significance} flips to reach p < {verdict.alpha:.2g}"
            if verdict.rough
            else ""
        )
        lines.append(
            f"  to decide: about {verdict.items_needed} questions; {c.n} detect a drop of "
            f"{verdict.detectable_drop_points:.1f} points "
            f"({verdict.power:.0%} power, discordance {verdict.planning_discordance:.1%} "
            f"{_source(verdict.discordance_source, names)}{rough})"
        )
    return "\n".join(lines)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def family_table_markdown(
    comparison: QualityComparison, names: tuple[str, str] = ("A", "B")
) -> str:
    """Per family: questions, correct in each run, losses and gains; a total row last."""
    a, b = names
    rows = list(comparison.families)
    total = FamilyRow(
        family="Total",
        n=sum(r.n for r in rows),
        correct_a=sum(r.correct_a for r in rows),
        correct_b=sum(r.correct_b for r in rows),
        losses=sum(r.losses for r in rows),
        gains=sum(r.gains for r in rows),
    )
    lines = [
        _row(["family", "questions", f"{a} correct", f"{b} correct", "lost", "gained"]),
        _row(["---", "---:", "---:", "---:", "---:", "---:"]),
    ]
    for r in [*rows, total]:
        family = r.family.replace("|", "\\|")
        lines.append(
            _row(
                [family, str(r.n), str(r.correct_a), str(r.correct_b), str(r.losses), str(r.gains)]
            )
        )
    return "\n".join(lines)
