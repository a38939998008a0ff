"""`combine`'s quality verdict: paired when the files hold answers, from counts when they don't."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sagemeter.compare import combine
from sagemeter.evidence.unpaired import decide_from_counts, newcombe_difference
from sagemeter.results import (
    Detail,
    Environment,
    MeasureResult,
    QualityDetail,
    QualityItem,
    save_result,
)
from tests.conftest import reference_file


def test_the_article_files_say_inconclusive_and_name_the_detectable_drop() -> None:
    comparison = combine(
        [reference_file("measure-gemma-4-e2b.json"), reference_file("measure-gemma-4-e2b-qat.json")]
    )
    (check,) = comparison.quality_checks
    assert check.verdict == "INCONCLUSIVE"
    assert check.paired is None and check.counts_verdict is not None
    # 37/40 each: about 15 points is the smallest loss 40 questions can show.
    assert 14.0 < check.counts_verdict.detectable_drop_points < 17.0
    assert check.counts_verdict.items_needed > 1000
    assert any("detectable drop" in line for line in check.summary)


def test_newcombe_interval_matches_the_published_example() -> None:
    """Newcombe (1998), method 10: 56/70 against 48/80 gives 0.2000 (0.0524, 0.3339)."""
    difference, low, high = newcombe_difference(48, 80, 56, 70)
    assert (round(difference, 4), round(low, 4), round(high, 4)) == (0.2, 0.0524, 0.3339)


def test_counts_verdict_passes_fails_and_hesitates() -> None:
    assert decide_from_counts(990, 1000, 995, 1000).verdict == "PASS"
    assert decide_from_counts(370, 400, 300, 400).verdict == "FAIL"
    assert decide_from_counts(37, 40, 36, 40).verdict == "INCONCLUSIVE"


def _answers(correct: list[bool], reply_of_wrong: str = "0") -> QualityDetail:
    items = [
        QualityItem(
            id=f"q{index:03d}",
            family=f"family-{index * 4 // len(correct)}",
            prompt=f"What is {index} + 1?",
            expected=str(index + 1),
            reply=str(index + 1) if right else reply_of_wrong,
            extracted=str(index + 1) if right else reply_of_wrong,
            correct=right,
        )
        for index, right in enumerate(correct)
    ]
    return QualityDetail(
        question_set="test",
        question_set_sha256="0" * 64,
        max_tokens=16,
        correct=sum(correct),
        total=len(correct),
        by_family={},
        items=items,
    )


def _write(tmp_path: Path, name: str, checkpoint: str, quality: QualityDetail) -> Path:
    result = MeasureResult(
        name=name,
        decode_tokens_per_second=10.0,
        quality=f"{quality.correct}/{quality.total}",
        detail=Detail(
            settings={"margin_points": 2.0},
            environment=Environment(
                target="local:x",
                backend="local",
                checkpoint_sha256=checkpoint,
                sagemeter_version="test",
                started_utc="2026-12-02T00:00:00Z",
            ),
            quality=quality,
        ),
    )
    path = tmp_path / f"measure-{name}.json"
    save_result(result, path)
    return path


@pytest.fixture
def aba(tmp_path: Path) -> list[Path]:
    """A right on 360 of 400; B loses 40 of those and gains none; A' answers as A did."""
    a = [index % 10 != 0 for index in range(400)]
    b = [right and index % 10 != 1 for index, right in enumerate(a)]
    return [
        _write(tmp_path, "a", "sha-a", _answers(a)),
        _write(tmp_path, "b", "sha-b", _answers(b)),
        _write(tmp_path, "a-again", "sha-a", _answers(a)),
    ]


def test_a_clear_loss_fails_with_the_noise_floor_from_a_again(aba: list[Path]) -> None:
    comparison = combine(aba)
    (check,) = comparison.quality_checks  # A' is the floor, not a candidate
    assert check.candidate == "b" and check.verdict == "FAIL"
    assert check.paired is not None and check.paired_verdict is not None
    assert len(check.paired.flips.losses) == 40 and not check.paired.flips.gains
    assert check.paired.noise is not None
    assert check.paired_verdict.drop_points == pytest.approx(10.0)


def test_the_margin_declared_in_the_settings_is_used_and_can_be_overridden(
    aba: list[Path],
) -> None:
    assert combine(aba).quality_checks[0].margin_points == 2.0
    generous = combine(aba, margin_points=30.0).quality_checks[0]
    assert generous.margin_points == 30.0 and generous.verdict == "PASS"


@pytest.mark.slow
def test_combine_command_prints_the_verdict_and_refuses_a_bad_margin(
    aba: list[Path], tmp_path: Path
) -> None:
    command = [
        sys.executable,
        "-m",
        "sagemeter",
        "combine",
        str(tmp_path / "c.json"),
        *map(str, aba),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "quality verdict, b against a" in done.stdout and "FAIL" in done.stdout
    again = [*command, "--margin", "0", "--force"]  # c.json exists: replacing it is asked for
    bad = subprocess.run(again, capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "margin" in bad.stderr
