"""The one rule for when the token events counted and the server's `usage` disagree.

`load` and `measure` both flag it, so they must agree on what a disagreement is: a reply that
was answered (no error, at least one token event) and whose `usage.completion_tokens` differs
from its token events after the ambiguous closing event was settled (`LiveRecord.settle`: an
empty closing delta counts only when usage says a token is missing). Empty-text and reasoning
events are tokens, so a server sending them is no disagreement; a server whose usage lies is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sagemeter.request_record import RequestRecord


def answered(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """Replies that came back with at least one token event: the ones a count can be checked on."""
    return [record for record in records if record.ok and record.events > 0]


def usage_disagreements(replies: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The replies whose usage count differs from the token events counted (none without usage)."""
    return [r for r in replies if r.usage_tokens is not None and r.usage_tokens != r.events]


def disagreement_note(disagreeing: Sequence[RequestRecord], of: int) -> str:
    """One line: how many of `of` replies disagreed, by how much, and the first one's counts."""
    differences = sorted({(r.usage_tokens or 0) - r.events for r in disagreeing})
    low, high = differences[0], differences[-1]
    by = f"{low:+d}" if low == high else f"{low:+d} to {high:+d}"
    first = disagreeing[0]
    return (
        f"{len(disagreeing)} of {of} replies: usage and content events disagree by {by} tokens "
        f"(usage − events; e.g. usage {first.usage_tokens} tokens, {first.events} content events)"
    )
