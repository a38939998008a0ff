"""After a run, the report puts `sagemaker recommend`'s predicted decode beside the measured one:
a plan written by `recommend --plan` (header from the loopback Hub, prices and quotas from the
loopback fakes) run by `sagemeter run` against moto and the loopback runtime, whose known-truth
server decodes at a set pace. The expected ceiling is computed here from the header's shapes and
the data-sheet bandwidth; the ratio from the two figures the result holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.experiment.plan import load_plan
from sagemeter.report.markdown import render_block
from sagemeter.report.predicted_decode import predicted_section
from sagemeter.report.runs import Run
from sagemeter.results.files import load_result
from sagemeter.results.predicted_decode import PredictedDecode, beside
from tests.sagemaker import test_sagemaker_recommend as recommend_tests
from tests.sagemaker.test_sagemaker_recommend import MODEL, _app, ceiling, run
from tests.sagemaker_fakes import RuntimeFake

if TYPE_CHECKING:
    from tests.hub_fake import Hub
    from tests.sagemaker_fakes import World

# The recommend tests' loopback Hub with its two checkpoints, and the priced fakes.
checkpoint, qat_checkpoint = recommend_tests.checkpoint, recommend_tests.qat_checkpoint
hub, priced = recommend_tests.hub, recommend_tests.priced
FIXED_RUN = Path(__file__).parents[1] / "data" / "report-run"
ITL_S = 0.004  # the truth server's pace: 250 tokens/s of decode


@pytest.fixture(scope="module")
def runtime_fake() -> Iterator[RuntimeFake]:
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=ITL_S)) as url:
        fake = RuntimeFake(url + "/v1")
        yield fake
        fake.close()


@pytest.mark.alone
@pytest.mark.slow
def test_a_recommended_plan_run_reports_predicted_beside_measured(
    priced: World, hub: Hub, runtime: RuntimeFake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_path = tmp_path / "types.toml"
    assert run(MODEL, "-r", "us-east-2", "--top", "2", "--plan", str(plan_path)).exit_code == 0
    text = plan_path.read_text()
    plan, _ = load_plan(plan_path)
    arms = {arm.name: arm.table for arm in plan.arms}
    assert list(arms) == ["g6e.xlarge", "g6e.12xlarge"]
    for sage in arms.values():
        assert sage is not None and sage.predicted_decode is not None
        predicted = sage.predicted_decode
        assert predicted.instance_type == sage.instance_type
        assert predicted.ceiling_tokens_per_second == round(ceiling(sage.instance_type), 1)
        low, high = predicted.likely_tokens_per_second or [0, 0]
        assert 0 < low <= high < predicted.ceiling_tokens_per_second
    # Measure quickly: the plan's levels stay, one decode request set, three short questions
    # (quality is not what this test checks), and each type once (A then B: the A' arm of the
    # written ABA order would only repeat A's rows).
    quick = (
        'order = "AB"\n\n[measure]\nquick = true\n'
        "questions-per-family = 1\nquality-max-tokens = 8\n"
    )
    plan_path.write_text(text.replace("[measure]\n", quick, 1))

    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(
        _app(), ["run", str(plan_path), "--out", "run", "--poll-seconds", "0.05"]
    )
    assert done.exit_code == 0, done.stderr + done.stdout

    folder = tmp_path / "run"
    report = (folder / "report.md").read_text()
    assert "Predicted beside measured decode" in report
    for name, sage in arms.items():
        assert sage is not None and sage.predicted_decode is not None
        data = json.loads((folder / f"measure-{name}.json").read_text())
        environment = data["detail"]["environment"]
        assert environment["predicted_decode"] == sage.predicted_decode.model_dump()
        assert environment["server"]["instance_types"] == [sage.instance_type]
        measured = data["decode_tokens_per_second"]
        assert measured == pytest.approx(1 / ITL_S, rel=0.5)  # the truth server's pace
        ratio = measured / sage.predicted_decode.ceiling_tokens_per_second
        row = next(line for line in report.splitlines() if line.startswith(f"| {name} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == sage.instance_type
        assert float(cells[2]) == pytest.approx(sage.predicted_decode.ceiling_tokens_per_second)
        assert float(cells[4]) == pytest.approx(measured, rel=0.01)
        assert cells[5] == f"{ratio:.3f}"
        low, high = sage.predicted_decode.likely_tokens_per_second or [0, 0]
        assert cells[6] == ("yes" if low <= measured <= high else "no")
        # The loopback server decodes faster than an 8B model on one L40S can: said, not hidden.
        above = f"{name}: measured {cells[4]} tok/s, above the predicted ceiling"
        assert (above in report) == (ratio > 1)
    assert "g6e.xlarge: measured" in report  # ~250 tok/s against a ceiling of 57.6
    # compare.json (and `combine`) carry the ceiling and measured / ceiling as rows, per file.
    comparison = json.loads((folder / "compare.json").read_text())
    rows = {row["key"]: row["values"] for row in comparison["rows"]}
    results = [json.loads((folder / f"measure-{n}.json").read_text()) for n in comparison["names"]]
    ceilings = [
        r["detail"]["environment"]["predicted_decode"]["ceiling_tokens_per_second"] for r in results
    ]
    assert rows["predicted_decode_ceiling_tokens_per_second"] == ceilings
    assert rows["decode_measured_over_predicted_ceiling"] == pytest.approx(
        [r["decode_tokens_per_second"] / c for r, c in zip(results, ceilings, strict=True)]
    )


def test_another_placed_type_or_no_prediction_compares_nothing() -> None:
    predicted = PredictedDecode(
        instance_type="ml.g6.xlarge",
        ceiling_tokens_per_second=161.1,
        likely_tokens_per_second=[75.0, 105.1],
    )
    same = beside(predicted, "ml.g6.xlarge", 105.1)
    assert same.measured_over_ceiling == pytest.approx(105.1 / 161.1) and same.within_likely
    other = beside(predicted, "ml.g6.2xlarge", 105.1)
    assert other.measured_over_ceiling is None and other.within_likely is None
    assert other.note == "predicted for ml.g6.xlarge, placed on ml.g6.2xlarge: not compared"
    assert beside(predicted, "ml.g6.xlarge", None).note == "decode was not measured"
    with pytest.raises(ValueError, match="low, high"):
        PredictedDecode(
            instance_type="ml.g6.xlarge",
            ceiling_tokens_per_second=161.1,
            likely_tokens_per_second=[105.0, 75.0],
        )


def test_results_without_a_prediction_get_no_section_and_one_gets_its_row() -> None:
    """The fixed demo run (no SageMaker arm) has no section; the same result given a prediction
    for a type that was not placed gets its row with n/a and the reason."""
    paths = sorted(FIXED_RUN.glob("measure-*.json"))
    results = [load_result(path) for path in paths]
    plain = Run(FIXED_RUN, results, paths, None, None)
    assert predicted_section(plain) is None
    first = results[0]
    assert first.detail is not None
    predicted = PredictedDecode(instance_type="ml.g6.xlarge", ceiling_tokens_per_second=161.1)
    environment = first.detail.environment.model_copy(update={"predicted_decode": predicted})
    given = first.model_copy(
        update={"detail": first.detail.model_copy(update={"environment": environment})}
    )
    section = predicted_section(Run(FIXED_RUN, [given, *results[1:]], paths, None, None))
    assert section is not None
    text = "\n".join(line for block in section.blocks for line in render_block(block, {}))
    assert "161.1" in text and "the placed instance type is not recorded" in text
