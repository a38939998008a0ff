"""Token-level fidelity math on constructed records, checked against values worked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.evidence.binomial import wilson_interval
from sagemeter.fidelity.compare import compare_fidelity, summary_lines
from sagemeter.fidelity.divergence import position_divergence
from sagemeter.fidelity.records import load_record, save_record
from sagemeter.results.fidelity_record import (
    FidelityRecord,
    Position,
    PromptRecord,
    TopToken,
    Vocabulary,
)

TEXT = {1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 6: "f"}


def top(*pairs: tuple[int, float]) -> list[TopToken]:
    """Top-k entries from (token id, probability) pairs."""
    return [TopToken(token, TEXT[token], math.log(p)) for token, p in pairs]


def record(
    prompts: list[list[list[TopToken]]], *, top_k: int = 2, model: str = "a"
) -> FidelityRecord:
    """A record whose prompt i has one position per top-k list; the answer is token 1 throughout."""
    return FidelityRecord(
        engine="llamacpp",
        model=model,
        base_url="http://127.0.0.1:1",
        top_k=top_k,
        max_tokens=4,
        forced=model != "a",
        started_utc="2026-01-01T00:00:00Z",
        ended_utc="2026-01-01T00:00:01Z",
        prompts=[
            PromptRecord(
                prompt=f"prompt {i}",
                prompt_token_ids=[9, 9, i],
                finish="length",
                positions=[Position(token_id=1, token_text="a", top=t) for t in tops],
            )
            for i, tops in enumerate(prompts)
        ],
    )


# Hand-worked positions (natural logs):
SAME = top((1, 0.6), (2, 0.3))
# A: a .6, b .3 (tail .1). B: a .5, c .4; b is missing from B's top-2, so q(b) = B's 2nd = .4,
# q_tail = 1 - .5 - .4 = .1. KL = .6 ln(.6/.5) + .3 ln(.3/.4) + .1 ln(.1/.1) = 0.0230880
A_MISSING, B_MISSING, KL_MISSING = SAME, top((1, 0.5), (3, 0.4)), 0.0230880
# A: a .7, b .2 (tail .1). B: b .6, a .3 (tail .1): top tokens differ.
# KL = .7 ln(.7/.3) + .2 ln(.2/.6) + .1 ln(.1/.1) = 0.3733866
A_FLIP, B_FLIP, KL_FLIP = top((1, 0.7), (2, 0.2)), top((2, 0.6), (1, 0.3)), 0.3733866


def test_position_identical_distributions_agree_with_zero_kl() -> None:
    step = position_divergence(SAME, SAME, 2)
    assert step.agree and step.kl == pytest.approx(0.0, abs=1e-12) and step.missing == 0


def test_position_kl_with_a_missing_token_uses_b_kth_logprob() -> None:
    step = position_divergence(A_MISSING, B_MISSING, 2)
    assert step.agree
    assert step.missing == 1 and step.compared == 2
    assert step.kl == pytest.approx(KL_MISSING, abs=1e-6)


def test_position_kl_when_top_tokens_differ() -> None:
    step = position_divergence(A_FLIP, B_FLIP, 2)
    assert not step.agree
    assert step.kl == pytest.approx(KL_FLIP, abs=1e-6)


def test_estimate_is_a_lower_bound_when_b_holds_all_of_a_top_k() -> None:
    p = [0.5, 0.2, 0.15, 0.1, 0.05]
    q = [0.3, 0.3, 0.05, 0.3, 0.05]
    true_kl = sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True))
    a = top((1, p[0]), (2, p[1]), (3, p[2]))
    b = top((1, q[0]), (2, q[1]), (4, q[3]), (3, q[2]))  # B's top-4 holds all of A's top-3
    estimate = position_divergence(a, b, 4).kl
    coarse = sum(pi * math.log(pi / qi) for pi, qi in zip(p[:3], q[:3], strict=True))
    coarse += (1 - sum(p[:3])) * math.log((1 - sum(p[:3])) / (1 - sum(q[:3])))
    assert estimate == pytest.approx(coarse, abs=1e-9)  # exactly the coarsened KL
    assert 0 < estimate <= true_kl


def test_compare_counts_agreement_kl_and_first_divergence() -> None:
    a = record([[SAME, A_FLIP], [A_MISSING]])
    b = record([[SAME, B_FLIP], [B_MISSING]], model="b")
    c = compare_fidelity(a, b)
    assert (c.prompts, c.positions, c.top_k) == (2, 3, 2)
    assert (c.agreement.count, c.agreement.total) == (2, 3)
    assert (c.agreement.low, c.agreement.high) == pytest.approx(wilson_interval(2, 3))
    assert c.kl_mean == pytest.approx((KL_FLIP + KL_MISSING) / 3, abs=1e-6)
    assert c.kl_median == pytest.approx(KL_MISSING, abs=1e-6)
    assert c.kl_max == pytest.approx(KL_FLIP, abs=1e-6)
    assert c.missing_share == pytest.approx(1 / 6)
    first, second = c.per_prompt
    assert (first.first_divergence, first.a_token, first.b_token) == (1, "a", "b")
    assert (first.positions, first.agreed) == (2, 1)
    assert second.first_divergence is None and second.kl_mean == pytest.approx(KL_MISSING, abs=1e-6)
    assert (c.diverging_prompts.count, c.diverging_prompts.total) == (1, 2)
    assert c.floor is None


def test_compare_with_floor_and_summary_lines() -> None:
    a = record([[SAME, A_FLIP], [A_MISSING]])
    b = record([[SAME, B_FLIP], [B_MISSING]], model="b")
    again = record([[SAME, A_FLIP], [A_MISSING]], model="a-again")
    c = compare_fidelity(a, b, floor=again)
    assert c.floor is not None
    assert c.floor.agreement.share == 1.0 and c.floor.kl_max == pytest.approx(0.0, abs=1e-12)
    lines = summary_lines(c)
    assert any("top-token agreement 66.7% (2/3" in line for line in lines)
    assert any(
        line.startswith("A' vs A (noise floor): top-token agreement 100.0% (3/3") for line in lines
    )
    assert any("earliest: prompt 1 at position 1, A 'a' vs B 'b'" in line for line in lines)
    assert not any("no noise floor" in line for line in lines)
    assert any("no noise floor" in line for line in summary_lines(compare_fidelity(a, b)))


def test_compare_uses_the_smaller_top_k() -> None:
    a = record([[top((1, 0.5), (2, 0.2), (3, 0.1))]], top_k=3)
    b = record([[top((1, 0.5), (2, 0.2))]], top_k=2, model="b")
    c = compare_fidelity(a, b)
    assert c.top_k == 2 and c.kl_max == pytest.approx(0.0, abs=1e-12) and c.missing_share == 0


def test_compare_refuses_a_record_not_forced_along_the_reference() -> None:
    a = record([[SAME, SAME]])
    b = record([[SAME, SAME]], model="b")
    b.prompts[0].positions[1] = Position(token_id=2, token_text="b", top=SAME)
    with pytest.raises(UserError, match="prompt 1 was not forced along the reference"):
        compare_fidelity(a, b)
    with pytest.raises(UserError, match="holds 2 prompts, the reference 1"):
        compare_fidelity(a, record([[SAME], [SAME]], model="b"))


def test_compare_refuses_models_with_different_vocabularies() -> None:
    a = record([[SAME]])
    b = record([[[TopToken(1, "zz", math.log(0.6)), TopToken(2, "b", math.log(0.3))]]], model="b")
    with pytest.raises(UserError, match="do not share a vocabulary"):
        compare_fidelity(a, b)


def test_template_mismatch_is_counted(tmp_path: Path) -> None:
    a = record([[SAME]])
    b = record([[SAME]], model="b")
    b.prompts[0].template_agrees = False
    c = compare_fidelity(a, b)
    assert c.template_mismatches == 1
    assert any("tokenized 1 prompt(s) differently" in line for line in summary_lines(c))


def test_record_round_trip_and_bad_files(tmp_path: Path) -> None:
    a = record([[SAME, A_FLIP]])
    path = tmp_path / "a.json"
    save_record(path, a)
    assert load_record(path) == a
    assert '"schema": "sagemeter.fidelity/1"' in path.read_text()
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        load_record(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"schema": "something else"}')
    with pytest.raises(UserError, match="not a fidelity record"):
        load_record(tmp_path / "other.json")
    (tmp_path / "broken.json").write_text(path.read_text().replace('"top_k": 2', '"top_k": "x"'))
    with pytest.raises(UserError, match="bad fidelity record at top_k"):
        load_record(tmp_path / "broken.json")
    with pytest.raises(UserError, match=r"missing\.json: no such file"):
        load_record(tmp_path / "missing.json")


def test_spellings_an_engine_cannot_render_whole_do_not_refuse() -> None:
    # vLLM and llama.cpp on one F32 checkpoint: llama.cpp writes nothing for <|im_end|> where
    # vLLM spells it out, and each drops an incomplete UTF-8 byte its own way.
    a = record([[[TopToken(1, "", math.log(0.6)), TopToken(2, " ", math.log(0.3))]]])
    b_tops = [TopToken(1, "<|im_end|>", math.log(0.6)), TopToken(2, "", math.log(0.3))]
    b = record([[b_tops]], model="b")
    c = compare_fidelity(a, b)
    assert c.agreement.count == 1 and c.kl_max == pytest.approx(0.0, abs=1e-12)
    assert "checked by the text both engines render" in c.vocabulary_check
    replaced = record([[[TopToken(1, "a", math.log(0.6)), TopToken(2, " \ufffd", math.log(0.3))]]])
    assert compare_fidelity(a, replaced).agreement.count == 1


def test_vocabulary_fingerprints_decide_when_both_records_carry_them() -> None:
    same = Vocabulary(size=6, sha256="ab" * 32, source="GGUF a.gguf")
    a = record([[SAME]])
    b = record([[[TopToken(1, "zz", math.log(0.6)), TopToken(2, "b", math.log(0.3))]]], model="b")
    a.vocabulary = same
    b.vocabulary = same.model_copy(update={"source": "tokenizer.json of a"})
    c = compare_fidelity(a, b)  # the spellings differ, the tokenizers' own maps do not
    assert c.vocabulary_check.startswith("token ids compared; one vocabulary (6 tokens)")
    assert any(line.startswith("vocabulary: token ids compared") for line in summary_lines(c))
    b.vocabulary = Vocabulary(size=7, sha256="cd" * 32, source="tokenizer.json of other")
    with pytest.raises(UserError, match=r"do not share a vocabulary: GGUF a\.gguf has 6 tokens"):
        compare_fidelity(a, b)
