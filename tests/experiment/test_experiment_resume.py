"""A run never loops, its plan's paths are frozen, and resume is checked (issue #30's audit).

- An arm whose server dies mid-measure ends the run incomplete (exit 3): the step says so, the
  comparison and the report mark the arm, and `--resume` says the run is finished.
- `combine` goes on when no question was answered by both files: quality null with the reason,
  speed rows kept.
- The journal keeps the time order of the measurements: a result measured again on resume after
  a later arm is stated in that order, and A-A' that did not bracket the others give no drift.
- A plan's relative paths mean the plan file's folder, resolved once and frozen in the journal
  with the questions file's sha256; resume refuses (one line, exit 2) when that file or the run
  folder's plan.toml changed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.cli.run import register
from sagemeter.compare import combine
from sagemeter.experiment import (
    freeze_paths,
    load_plan,
    parse_plan,
    read_journal,
    resume_run,
    start_run,
)
from sagemeter.experiment.frozen import sha256_of
from sagemeter.experiment.steps import measured_order
from sagemeter.measure.workflow import selected_questions
from sagemeter.results import (
    Detail,
    Environment,
    MeasureResult,
    QualityDetail,
    QualityItem,
    save_result,
)
from tests.experiment.test_experiment_local import SHORT, journal_of, sagemeter

TIMING = TruthTiming(ttft_s=0.01, itl_s=0.002)
# The SHORT plan's measure sends 8 generation requests before its quality phase (decode, the
# 1-at-once batch, part of the 2-at-once one), then 3 questions: dying after 8 loses a load
# level and every answer, and keeps the decode figures.
DIES_AFTER = 8


def _run_app() -> typer.Typer:
    """`sagemeter run` in this process (its refusals come before any work)."""
    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """sagemeter"""

    register(app)
    return app


def two_arm_plan(url_a: str, url_b: str, top: str = "", measure: str = "") -> str:
    arms = f'\n[[arm]]\nname = "a"\ntarget = "{url_a}"\n\n[[arm]]\nname = "b"\ntarget = "{url_b}"\n'
    return 'name = "truth"\n' + top + SHORT + measure + arms


def test_die_after_answers_n_requests_then_the_server_is_gone() -> None:
    with running_truth_server(TIMING, faults=Faults(die_after=1)) as url:
        body = {"model": "m", "prompt": "hi", "max_tokens": 2}
        with httpx.Client(base_url=url, timeout=5) as client:
            first = client.post("/v1/completions", json=body)
            assert first.status_code == 200 and first.json()["usage"]["completion_tokens"] == 2
            with pytest.raises(httpx.TransportError):
                client.post("/v1/completions", json=body)
        with pytest.raises(httpx.ConnectError):  # the process exited: nothing listens
            httpx.get(f"{url}/health", timeout=2)


@pytest.mark.slow
def test_an_arm_whose_server_dies_mid_measure_ends_the_run_incomplete_not_looping(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with (
        running_truth_server(TIMING) as good,
        running_truth_server(TIMING, faults=Faults(die_after=DIES_AFTER)) as dying,
    ):
        (tmp_path / "plan.toml").write_text(two_arm_plan(good, dying))
        ran = sagemeter("run", "plan.toml", "--out", "run", home=home, cwd=tmp_path)
    assert ran.returncode == 3, ran.stderr
    assert "incomplete:" in ran.stderr and "--resume" not in ran.stderr
    assert "[2/5] measure b incomplete" in ran.stderr
    run = tmp_path / "run"
    journal = journal_of(run)
    assert journal["state"] == "done"
    assert [step["state"] for step in journal["steps"]] == [
        "done", "incomplete", "done", "done", "done"
    ]  # fmt: skip
    assert [line.split(":")[0] for line in journal["incomplete"]] == ["b"]
    assert "incomplete: b" in journal["steps"][1]["note"]

    comparison = json.loads((run / "compare.json").read_text())
    assert comparison["names"] == ["a", "b", "a-again"]
    assert comparison["incomplete"][0] is None and comparison["incomplete"][2] is None
    assert "b is incomplete" in comparison["incomplete"][1]
    assert comparison["quality_not_compared"] == [
        "no question was answered by both a and b (b answered no question)"
    ]
    assert comparison["quality_checks"] == []
    rows = {row["key"]: row["values"] for row in comparison["rows"]}
    assert all(value is not None for value in rows["decode_tokens_per_second"])  # speed stays
    assert rows["quality_correct"][1] is None  # b answered nothing: no count, not zero
    assert rows["quality_correct"][0] is not None
    report = (run / "report.md").read_text()
    assert "b is incomplete" in report and "quality not compared" in report

    again = sagemeter("report", "run", home=home, cwd=tmp_path)
    assert again.returncode == 3, again.stderr  # written, but an arm is incomplete
    assert again.stderr.strip().splitlines()[-1].startswith("incomplete: b")
    kept = {path.name: path.read_bytes() for path in run.glob("measure-*.json")}
    resumed = sagemeter("run", "--resume", "run", home=home, cwd=tmp_path)
    assert resumed.returncode == 3, resumed.stderr  # finished, still incomplete
    lines = resumed.stdout.strip().splitlines()
    assert len(lines) == 1 and "this run is finished, b incomplete" in lines[0], resumed.stdout
    assert "nothing to resume" in lines[0]
    assert {path.name: path.read_bytes() for path in run.glob("measure-*.json")} == kept
    assert len(journal_of(run)["sessions"]) == 1  # nothing ran again


def _quality(answered: bool) -> QualityDetail:
    items = [
        QualityItem(
            id=f"q{index}",
            family="sums",
            prompt=f"{index} + 1?",
            expected=str(index + 1),
            reply=str(index + 1) if answered else None,
            correct=answered,
            error=None if answered else "cannot connect: Connection refused",
        )
        for index in range(4)
    ]
    correct = 4 if answered else 0
    return QualityDetail(
        question_set="test",
        question_set_sha256="0" * 64,
        max_tokens=16,
        correct=correct,
        total=4,
        answered=4 if answered else 0,
        by_family={},
        items=items,
    )


def _result(
    tmp_path: Path, name: str, checkpoint: str, answered: bool, started: str, asked: bool = True
) -> Path:
    """A result file; `asked=False` leaves quality out (no verdict to compute)."""
    quality = _quality(answered)
    result = MeasureResult(
        name=name,
        decode_tokens_per_second=10.0 if checkpoint == "sha-a" else 12.0,
        quality=f"{quality.correct}/{quality.answered_count}" if asked else None,
        complete=answered,
        incomplete_because=[] if answered else ["quality: 4 of 4 questions unanswered"],
        detail=Detail(
            settings={"margin_points": 2.0},
            environment=Environment(
                target="local:x",
                backend="local",
                checkpoint_sha256=checkpoint,
                sagemeter_version="test",
                started_utc=started,
            ),
            quality=quality if asked else None,
        ),
    )
    path = tmp_path / f"measure-{name}.json"
    save_result(result, path)
    return path


def test_combine_goes_on_when_no_question_was_answered_by_both(tmp_path: Path) -> None:
    paths = [
        _result(tmp_path, "a", "sha-a", True, "2026-12-04T10:00:00Z"),
        _result(tmp_path, "b", "sha-b", False, "2026-12-04T10:01:00Z"),
        _result(tmp_path, "a-again", "sha-a", True, "2026-12-04T10:02:00Z"),
    ]
    comparison = combine(paths)
    assert comparison.quality_checks == []
    assert comparison.quality_not_compared == [
        "no question was answered by both a and b (b answered no question)"
    ]
    rows = {row.key: row for row in comparison.rows}
    assert rows["decode_tokens_per_second"].ratios == [1.2, 1.0]
    assert rows["quality_correct"].values == [4.0, None, 4.0]
    assert comparison.identical_answers is None  # nothing answered by both to compare
    assert any("b is incomplete" in warning for warning in comparison.warnings)
    assert comparison.drift is not None  # a and a-again bracket b in time


def _questions(path: Path, answer: str) -> Path:
    lines = [
        json.dumps({"family": "sums", "prompt": f"{n} + {answer}?", "answer": str(n)})
        for n in range(3)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _started(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A run started from plans/plan.toml, whose `questions = "q.jsonl"` is plans/q.jsonl, while
    the current folder holds another q.jsonl: (run folder, the plan's questions, the decoy).
    Started as `sagemeter run` starts one (its arms are never contacted before measuring)."""
    plans = tmp_path / "plans"
    plans.mkdir()
    kept = _questions(plans / "q.jsonl", "1")
    here = tmp_path / "here"
    here.mkdir(exist_ok=True)
    decoy = _questions(here / "q.jsonl", "2")
    plan_file = plans / "plan.toml"
    plan_file.write_text(
        two_arm_plan("http://127.0.0.1:9", "http://127.0.0.1:9", measure='questions = "q.jsonl"\n')
    )
    plan, text = load_plan(plan_file)
    plan = freeze_paths(plan, plan_file.resolve().parent)
    run = tmp_path / "run"
    start_run(plan, out=run, plan_text=text, plan_source=str(plan_file))
    return run, kept, decoy


def test_a_plans_relative_paths_mean_its_own_folder_and_are_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")  # started where another q.jsonl lies
    run, kept, decoy = _started(tmp_path)
    journal = read_journal(run)
    assert journal.plan["measure"]["questions"] == str(kept.resolve())  # type: ignore[index]
    assert [(i.key, i.path, i.sha256) for i in journal.inputs] == [
        ("measure.questions", str(kept.resolve()), sha256_of(kept))
    ]
    assert journal.plan_sha256 == sha256_of(run / "plan.toml")
    assert sha256_of(decoy) != sha256_of(kept)  # the current folder's q.jsonl was not taken

    monkeypatch.chdir(tmp_path)  # resumed from another folder: the frozen path is used
    prepared = resume_run(run)
    assert selected_questions(prepared.plan.settings()).sha256 == sha256_of(kept)

    kept.write_text(kept.read_text().replace("+ 1?", "+ 3?"))
    refused = CliRunner().invoke(_run_app(), ["run", "--resume", str(run)])
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert (
        "measure.questions" in refused.stderr and "changed since the run started" in refused.stderr
    )
    assert "restore it, or start a new run" in refused.stderr
    assert read_journal(run).sessions == []  # refused before any work


def test_a_local_gguf_is_an_input_whose_change_refuses_resume(
    tmp_path: Path, q4_path: Path
) -> None:
    (tmp_path / "models").mkdir()
    own = tmp_path / "models" / "own.gguf"
    own.write_bytes(q4_path.read_bytes())
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        'name = "p"\n[[arm]]\nname = "a"\ntarget = "local:smollm2-q4_1"\n'
        '[[arm]]\nname = "b"\ntarget = "local:models/own.gguf"\n'
    )
    plan, text = load_plan(plan_file)
    run = tmp_path / "run"
    start_run(freeze_paths(plan, tmp_path), out=run, plan_text=text, plan_source="plan.toml")
    (frozen,) = read_journal(run).inputs
    assert (frozen.key, frozen.path) == ('arm "b".target', str(own.resolve()))
    with own.open("ab") as handle:
        handle.write(b"\0")
    refused = CliRunner().invoke(_run_app(), ["run", "--resume", str(run)])
    assert refused.exit_code == 2
    assert refused.stderr.startswith(f'error: {own.resolve()} (arm "b".target): changed since')


def test_local_checkpoint_paths_are_frozen_and_named_ones_kept(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        'name = "p"\n[[arm]]\nname = "a"\ntarget = "local:smollm2-q4_1"\n'
        '[[arm]]\nname = "b"\ntarget = "local:models/b.gguf"\n'
        '[[arm]]\nname = "c"\ntarget = "vllm:./hf/c"\n'
        '[[arm]]\nname = "d"\ntarget = "http://127.0.0.1:9"\n'
    )
    plan, _ = load_plan(plan_file, ready=False)  # the files need not exist to be frozen
    frozen = freeze_paths(plan, tmp_path)
    assert [arm.target for arm in frozen.arms] == [
        "local:smollm2-q4_1",
        f"local:{tmp_path.resolve() / 'models' / 'b.gguf'}",
        f"vllm:{tmp_path.resolve() / 'hf' / 'c'}",
        "http://127.0.0.1:9",
    ]


def test_an_edited_plan_toml_in_the_run_folder_refuses_resume(tmp_path: Path) -> None:
    run, _, _ = _started(tmp_path)
    original = (run / "plan.toml").read_text()
    before = (run / "journal.json").read_bytes()
    (run / "plan.toml").write_text(original.replace("repeats = 2", "repeats = 5"))
    for extra in ([], ["--dry-run"]):
        refused = CliRunner().invoke(_run_app(), ["run", "--resume", str(run), *extra])
        assert refused.exit_code == 2, refused.output
        lines = refused.stderr.splitlines()
        assert len(lines) == 1 and "plan.toml: edited since the run started" in lines[0]
        assert "restore the file, or start a new run" in lines[0]
    assert (run / "journal.json").read_bytes() == before  # nothing ran, nothing was written

    (run / "plan.toml").unlink()
    missing = CliRunner().invoke(_run_app(), ["run", "--resume", str(run)])
    assert missing.exit_code == 2 and "plan.toml: missing" in missing.stderr

    (run / "plan.toml").write_text(original)  # restored: resume goes on
    assert resume_run(run).journal.plan_sha256 == sha256_of(run / "plan.toml")


def test_a_and_a_again_measured_back_to_back_give_no_drift(tmp_path: Path) -> None:
    """B first, then A (its file measured again), then A': no drift from back-to-back runs."""
    paths = [
        _result(tmp_path, "a", "sha-a", True, "2026-12-04T10:05:00Z", asked=False),
        _result(tmp_path, "b", "sha-b", True, "2026-12-04T10:00:00", asked=False),  # bare: UTC
        _result(tmp_path, "a-again", "sha-a", True, "2026-12-04T10:06:00Z", asked=False),
    ]
    comparison = combine(paths)
    assert comparison.drift is None
    assert comparison.drift_note == (
        "no A-A' drift: a and a-again were not measured first and last (in time: b, a, "
        "a-again), so their difference is not the drift across the run"
    )
    assert comparison.drift_note in comparison.warnings
    flags = {row.key: row.ratio_flags for row in comparison.rows}["decode_tokens_per_second"]
    assert not any(flag and "drift" in flag for flag in flags)  # no band from A-A'


def test_the_stated_order_is_the_time_order_of_the_journal() -> None:
    plan = parse_plan(two_arm_plan("http://127.0.0.1:9", "http://127.0.0.1:9"))
    assert measured_order(plan, ["a", "b", "a-again"]) == ("ABA", None)
    assert measured_order(plan, ["a", "b"]) == ("ABA", None)  # not all measured: the plan's
    assert measured_order(plan, ["a", "b", "a-again", "a"]) == (
        "BAA",
        "planned ABA, measured b, a-again, a in that time order; a measured again on resume",
    )
    assert measured_order(plan, ["a", "b", "a", "a-again"]) == (
        "BAA",
        "planned ABA, measured b, a, a-again in that time order; a measured again on resume",
    )


def _measured(run: Path, name: str) -> bool:
    """The run's journal (written whole, atomically) records `name` as measured."""
    try:
        return name in journal_of(run)["measured"]
    except (OSError, ValueError, KeyError):
        return False


@pytest.mark.slow
def test_resume_after_a_deleted_result_states_the_true_order_and_its_frozen_questions(
    tmp_path: Path,
) -> None:
    """Killed after B; A's file deleted; resumed from another folder: A and A' are measured
    after B, with the plan folder's questions, and the run says so (no A-A' drift)."""
    plans, here, elsewhere = tmp_path / "plans", tmp_path / "here", tmp_path / "elsewhere"
    for folder in (plans, here, elsewhere):
        folder.mkdir()
    kept = _questions(plans / "q.jsonl", "1")
    for decoy in (here, elsewhere):
        _questions(decoy / "q.jsonl", "2")
    home = tmp_path / "home"
    with running_truth_server(TIMING) as url:
        (plans / "plan.toml").write_text(two_arm_plan(url, url, measure='questions = "q.jsonl"\n'))
        process = subprocess.Popen(
            [sys.executable, "-m", "sagemeter", "run", "../plans/plan.toml", "--out", "../run"],
            cwd=here,
            env={**os.environ, "SAGEMETER_HOME": str(home), "COLUMNS": "200"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        run = tmp_path / "run"
        deadline = time.monotonic() + 300
        # Killed once the journal records b as measured (its file is written a moment before).
        while not _measured(run, "b") and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert _measured(run, "b"), "b was never measured"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        (run / "measure-a.json").unlink()
        resumed = sagemeter("run", "--resume", "../run", home=home, cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    journal = journal_of(run)
    assert journal["measured"][:2] == ["a", "b"] and journal["measured"][-1] in ("a", "a-again")
    assert journal["measured"].count("a") == 2

    comparison = json.loads((run / "compare.json").read_text())
    assert comparison["names"] == ["a", "b", "a-again"]
    assert comparison["order"] == "BAA"
    assert comparison["order_note"].startswith("planned ABA, measured b, ")
    assert "a measured again on resume" in comparison["order_note"]
    assert comparison["time_order"] == ["b", "a", "a-again"]  # the journal's, not start times
    assert comparison["drift"] is None
    assert comparison["drift_note"].startswith("no A-A' drift: a and a-again were not measured")
    report = (run / "report.md").read_text()
    assert "Measured in the order BAA (planned ABA, measured b, " in report
    assert "no A-A' drift" in report and "A-B-A drift" not in resumed.stdout

    digest = sha256_of(kept)
    for name in ("a", "b", "a-again"):
        result = json.loads((run / f"measure-{name}.json").read_text())
        assert result["detail"]["quality"]["question_set_sha256"] == digest


def test_a_resume_that_fails_as_the_session_before_says_so_instead_of_advising_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing answers at the arms' address: the first session and every resume fail alike."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.toml").write_text(two_arm_plan("http://127.0.0.1:9", "http://127.0.0.1:9"))
    first = CliRunner().invoke(_run_app(), ["run", "plan.toml", "--out", "run"])
    assert first.exit_code == 1, first.output
    assert first.stderr.splitlines()[-1] == "continue it with `sagemeter run --resume run`"
    for _ in range(2):
        again = CliRunner().invoke(_run_app(), ["run", "--resume", "run"])
        assert again.exit_code == 1, again.output
        assert again.stderr.splitlines()[-1] == (
            "the session before failed at this step too: a resume as is repeats it; fix what "
            "it says, then `sagemeter run --resume run`"
        )
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "failed" and len(journal["sessions"]) == 3


def test_an_interleaved_run_with_an_arm_measured_again_alone_is_not_called_interleaved() -> None:
    plan = parse_plan(
        two_arm_plan("http://127.0.0.1:9", "http://127.0.0.1:9", 'order = "interleaved"\n')
    )
    assert measured_order(plan, ["a", "b"]) == ("interleaved", None)
    assert measured_order(plan, ["a", "b", "a", "b"]) == ("interleaved", None)  # together again
    assert measured_order(plan, ["a", "b", "a"]) == (
        "BA",
        "planned interleaved, measured b, a in that time order; a measured again on resume "
        "without the others, their requests not in turn",
    )
