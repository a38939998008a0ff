"""Compare two fidelity records position by position: a pure function, no network.

B must have been collected with A as its reference (same prompts, B forced along A's answer
tokens), so position i of a prompt is, in both records, the next-token distribution after the
same prefix. A third record, A measured again the same way (A'), gives the noise floor: what the
figures look like when nothing but the run changed.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from sagemeter.errors import UserError
from sagemeter.evidence.binomial import wilson_interval
from sagemeter.fidelity.divergence import PositionDivergence, position_divergence
from sagemeter.results.fidelity_record import FidelityRecord, PromptRecord, Vocabulary


class Share(BaseModel):
    """k of n, with its Wilson 95% interval."""

    count: int
    total: int
    share: float | None
    low: float
    high: float


class PromptFidelity(BaseModel):
    """One prompt: where B's top token first differed from A's (None: never, in A's answer)."""

    index: int
    prompt: str
    positions: int
    agreed: int
    first_divergence: int | None = Field(
        description="position of the first disagreement; B's own greedy answer would have "
        "followed A's tokens up to there"
    )
    a_token: str | None = Field(None, description="A's top token at the first divergence")
    b_token: str | None = Field(None, description="B's top token at the first divergence")
    kl_mean: float


class FidelityComparison(BaseModel):
    """Token-level fidelity of B against A, and optionally of A' against A (the noise floor)."""

    a_model: str
    b_model: str
    a_engine: str
    b_engine: str
    top_k: int
    prompts: int
    positions: int
    agreement: Share = Field(description="positions where B's top token equals A's")
    diverging_prompts: Share = Field(description="prompts with at least one disagreement")
    kl_mean: float
    kl_median: float
    kl_p90: float
    kl_max: float
    missing_share: float = Field(
        description="share of A's top-k tokens absent from B's top-k (these rest on the bound)"
    )
    template_mismatches: int = Field(
        description="prompts whose prompt tokens B's own chat template made differently"
    )
    vocabulary_check: str = Field(
        "", description="how a token id was made sure to mean the same token in both records"
    )
    per_prompt: list[PromptFidelity]
    floor: FidelityComparison | None = None


def _share(count: int, total: int) -> Share:
    low, high = wilson_interval(count, total)
    return Share(
        count=count, total=total, share=count / total if total else None, low=low, high=high
    )


def _check_pair(a: FidelityRecord, b: FidelityRecord, label: str) -> str:
    """Refuse records that cannot be compared position by position; say how the vocabulary was
    checked."""
    if len(a.prompts) != len(b.prompts):
        raise UserError(f"{label} holds {len(b.prompts)} prompts, the reference {len(a.prompts)}")
    for index, (pa, pb) in enumerate(zip(a.prompts, b.prompts, strict=True), start=1):
        if pa.prompt != pb.prompt:
            raise UserError(f"{label}: prompt {index} differs from the reference's")
        if pa.answer_token_ids != pb.answer_token_ids or pa.prompt_token_ids != pb.prompt_token_ids:
            raise UserError(
                f"{label}: prompt {index} was not forced along the reference's tokens; "
                "collect it with the reference record as reference"
            )
    if a.vocabulary is not None and b.vocabulary is not None:
        return _check_fingerprints(a.vocabulary, b.vocabulary, label)
    for index, (pa, pb) in enumerate(zip(a.prompts, b.prompts, strict=True), start=1):
        _check_spellings(pa, pb, index, label)
    return (
        "token ids compared; the tokenizers' own id → token maps were not both recorded, so ids "
        "were checked by the text both engines render for them, where both render it whole"
    )


def _check_fingerprints(a: Vocabulary, b: Vocabulary, label: str) -> str:
    """The tokenizers' own id → token maps, hashed: equal, or the models cannot be compared."""
    if (a.size, a.sha256) != (b.size, b.sha256):
        raise UserError(
            f"{label}: the two models do not share a vocabulary: {a.source} has {a.size:,} tokens "
            f"(SHA-256 {a.sha256[:12]}…), {b.source} {b.size:,} (SHA-256 {b.sha256[:12]}…)"
        )
    return f"token ids compared; one vocabulary ({a.size:,} tokens): {a.source} = {b.source}"


def _renders_whole(text: str) -> bool:
    """Engines drop or replace what they cannot render as text: special tokens (llama.cpp
    writes nothing for `<|im_end|>`) and incomplete UTF-8 bytes (vLLM writes '' or '�').
    Such a spelling says nothing about which token an id is."""
    return bool(text) and "\ufffd" not in text


def _check_spellings(pa: PromptRecord, pb: PromptRecord, index: int, label: str) -> None:
    """A token id both engines render whole must render the same, or the vocabularies differ."""
    for position, (xa, xb) in enumerate(zip(pa.positions, pb.positions, strict=True)):
        spelled = {token.id: token.text for token in xa.top}
        for token in xb.top:
            other = spelled.get(token.id)
            if other is None or other == token.text:
                continue
            if _renders_whole(other) and _renders_whole(token.text):
                raise UserError(
                    f"{label}: prompt {index}, position {position}: token {token.id} is "
                    f"{other!r} in the reference but {token.text!r} here; "
                    "the two models do not share a vocabulary"
                )


def _prompt_fidelity(
    index: int, pa: PromptRecord, pb: PromptRecord, steps: list[PositionDivergence]
) -> PromptFidelity:
    first = next((i for i, step in enumerate(steps) if not step.agree), None)
    return PromptFidelity(
        index=index,
        prompt=pa.prompt,
        positions=len(steps),
        agreed=sum(step.agree for step in steps),
        first_divergence=first,
        a_token=pa.positions[first].top[0].text if first is not None else None,
        b_token=pb.positions[first].top[0].text if first is not None else None,
        kl_mean=float(np.mean([step.kl for step in steps])) if steps else 0.0,
    )


def compare_fidelity(
    a: FidelityRecord, b: FidelityRecord, floor: FidelityRecord | None = None
) -> FidelityComparison:
    """B against reference A over every forced position; with `floor` (A'), A' against A too."""
    vocabulary_check = _check_pair(a, b, "B")
    k = min(a.top_k, b.top_k)
    per_prompt = []
    steps: list[PositionDivergence] = []
    for index, (pa, pb) in enumerate(zip(a.prompts, b.prompts, strict=True)):
        prompt_steps = [
            position_divergence(xa.top, xb.top, k)
            for xa, xb in zip(pa.positions, pb.positions, strict=True)
        ]
        steps.extend(prompt_steps)
        per_prompt.append(_prompt_fidelity(index, pa, pb, prompt_steps))
    if not steps:
        raise UserError("the records hold no answer tokens to compare")
    kls = np.array([step.kl for step in steps])
    return FidelityComparison(
        a_model=a.model,
        b_model=b.model,
        a_engine=a.engine,
        b_engine=b.engine,
        top_k=k,
        prompts=len(per_prompt),
        positions=len(steps),
        agreement=_share(sum(step.agree for step in steps), len(steps)),
        diverging_prompts=_share(
            sum(p.first_divergence is not None for p in per_prompt), len(per_prompt)
        ),
        kl_mean=float(kls.mean()),
        kl_median=float(np.median(kls)),
        kl_p90=float(np.percentile(kls, 90)),
        kl_max=float(kls.max()),
        missing_share=sum(s.missing for s in steps) / sum(s.compared for s in steps),
        template_mismatches=sum(not p.template_agrees for p in b.prompts),
        vocabulary_check=vocabulary_check,
        per_prompt=per_prompt,
        floor=compare_fidelity(a, floor) if floor is not None else None,
    )


def _percent(share: Share) -> str:
    if share.share is None:
        return "n/a"
    return (
        f"{100 * share.share:.1f}% ({share.count}/{share.total}, "
        f"95% CI {100 * share.low:.1f}–{100 * share.high:.1f}%)"
    )


def _figures(c: FidelityComparison, label: str, other: str) -> list[str]:
    return [
        f"{label}: top-token agreement {_percent(c.agreement)} over {c.positions} positions "
        f"of {c.prompts} prompts",
        f"{label}: KL(A‖{other}) per position (top-{c.top_k} estimate): mean {c.kl_mean:.4g}, "
        f"median {c.kl_median:.4g}, p90 {c.kl_p90:.4g}, max {c.kl_max:.4g} nats; "
        f"{100 * c.missing_share:.1f}% of A's top-{c.top_k} tokens missing from {other}'s",
        f"{label}: prompts where {other}'s greedy answer would leave A's: "
        f"{_percent(c.diverging_prompts)}",
    ]


def summary_lines(comparison: FidelityComparison) -> list[str]:
    """Plain lines for a terminal or a report: B against A, then the A-vs-A' floor if measured."""
    c = comparison
    lines = [
        f"token-level fidelity: B = {c.b_model} ({c.b_engine}) against A = {c.a_model} "
        f"({c.a_engine})"
    ]
    lines += _figures(c, "B vs A", "B")
    diverged = [(p.first_divergence, p) for p in c.per_prompt if p.first_divergence is not None]
    if diverged:
        diverged.sort(key=lambda pair: pair[0])
        median_position = diverged[len(diverged) // 2][0]
        earliest_position, earliest = diverged[0]
        lines.append(
            f"B vs A: first divergence at position {median_position} (median of diverging "
            f"prompts); earliest: prompt {earliest.index + 1} at position {earliest_position}, "
            f"A {earliest.a_token!r} vs B {earliest.b_token!r}"
        )
    if c.vocabulary_check:
        lines.append(f"vocabulary: {c.vocabulary_check}")
    if c.template_mismatches:
        lines.append(
            f"note: B's chat template tokenized {c.template_mismatches} prompt(s) differently "
            "from A's (A's tokens were used)"
        )
    if c.floor is not None:
        lines += _figures(c.floor, "A' vs A (noise floor)", "A'")
    else:
        lines.append("no noise floor: measure A again (A') and pass it as floor")
    lines.append(
        "agreement intervals treat positions as independent; positions of one prompt are not, "
        "so read the per-prompt count as the firmer figure"
    )
    return lines
