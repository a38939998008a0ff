"""`sagemeter demo --quick`: the whole A-B-A job on the embedded engine, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.long(85)]  # seconds (tests/long_modules.py)


def test_demo_quick_runs_a_b_a_and_reports_drift(shared_home: Path, tmp_path: Path) -> None:
    import os

    # A question file of the bank's first two questions in five of its families, cut to one a
    # family: both flags reach the run (5 questions, not 10 nor --quick's 6) with 15 answers in
    # all, where the bank's 20 families took 60 of the demo's 90 requests.
    from sagemeter.questions import load_question_set

    firsts: dict[str, list[dict[str, object]]] = {}
    for question in load_question_set("bank-1000").questions:
        kept = firsts.setdefault(question.family, [])
        if len(kept) < 2:
            kept.append(question.model_dump(mode="json", exclude_none=True))
    lines = [json.dumps(item) for family in list(firsts)[:5] for item in firsts[family]]
    questions = tmp_path / "five-families.jsonl"
    questions.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "sagemeter", "demo", "--quick", "--out", str(out)),
            *("--fidelity", "2", "--questions", str(questions), "--questions-per-family", "1"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "SAGEMETER_HOME": str(shared_home), "COLUMNS": "200"},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names = ["smollm2-f32", "smollm2-q4_1", "smollm2-f32-again"]
    for name in names:
        assert (out / f"measure-{name}.json").is_file()
        assert (out / f"engine-{name}.log").is_file()
    comparison = json.loads((out / "compare.json").read_text())
    assert comparison["names"] == names
    rows = {row["key"]: row for row in comparison["rows"]}
    weights = rows["weights_gib"]["ratios"][0]
    assert 0.15 < weights < 0.2  # 4-bit storage is about a sixth of 32-bit
    assert comparison["identical_answers"] is not None
    engine_rate = rows["engine_decode_tokens_per_second"]["values"]
    assert all(value is not None and value > 0 for value in engine_rate)
    assert all(value is not None and value > 0 for value in rows["ttft_median_ms"]["values"])
    drift = comparison["drift"]
    assert drift["first"] == "smollm2-f32" and drift["last"] == "smollm2-f32-again"
    assert set(drift["relative_change"]) >= {
        "decode_tokens_per_second",
        "load_c1_tokens_per_second",
    }
    assert "A-B-A drift" in done.stdout
    from sagemeter.experiment import load_plan
    from sagemeter.experiment.demo import demo_plan

    rerun, _ = load_plan(out / "plan.toml")  # the plan it ran, for `sagemeter run plan.toml`
    asked = {"fidelity": 2, "questions": str(questions), "questions_per_family": 1}
    assert rerun == demo_plan(True, asked)
    assert (out / "report.md").read_text().startswith("#")
    assert (out / "report.html").stat().st_size > 10_000
    assert (out / "plots" / "throughput.png").is_file()
    assert "identical answers" in done.stdout
    # The chosen question set (one per family), its verdict, and fidelity with B and
    # A' forced along A's answers.
    (check,) = comparison["quality_checks"]
    assert check["verdict"] in {"PASS", "FAIL", "INCONCLUSIVE"}
    assert check["paired"]["n"] == 5 and len(check["paired"]["families"]) == 5
    assert "quality verdict, smollm2-q4_1 against smollm2-f32" in done.stdout
    (fidelity,) = comparison["fidelity_checks"]
    assert fidelity["comparison"]["prompts"] == 2
    assert fidelity["comparison"]["floor"]["agreement"]["share"] == 1.0  # A' is A, token for token
    assert "Verdict for smollm2-q4_1" in (out / "report.md").read_text()
