"""A run never loops, and a resume is honest (issue #30's rule, tested as a class).

- Every way a measure step can end incomplete (its server dies mid-measure, its server turns
  into another model, `max_minutes` cuts it; A-B-A and interleaved) ends the run `done` with the
  arm marked, exit 3; `combine` and `report` on those files mark it and show what was measured
  (exit 0); `--resume` says the run is finished and runs nothing.
- Every kind of path a plan holds (the questions file, a `local:` or `vllm:` checkpoint, a
  `cmd:` arm's program) means the plan file's folder, is resolved once and frozen in the journal,
  and a resume typed from another folder uses the frozen value.
- A resume refuses, in one line and before any work, a run folder that changed under it: its
  plan.toml edited or gone, an input file changed, a result file edited, a result file the run
  did not write; a result deleted is measured again, and the order and drift the run states are
  the time order the journal recorded.

Plans run in this process (typer's CliRunner) on calibrate-server arms: a few seconds each.
"""

from __future__ import annotations

import json
import stat
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from sagemeter.calibrate import running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.cli import combine as combine_cli
from sagemeter.cli import report as report_cli
from sagemeter.cli import run as run_cli
from sagemeter.experiment import freeze_paths, load_plan, read_journal
from sagemeter.experiment.frozen import sha256_of
from tests.experiment.test_experiment_resume import TIMING, two_arm_plan

# Slow: most tests run whole plans, resumes and reports (2-16 s each, 52 CPU-s for the module
# on a 2-core host); one starts a `cmd:` arm's server three times by command line.
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")


def _app() -> typer.Typer:
    """`sagemeter run`, `combine` and `report` in this process."""
    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """sagemeter"""

    for module in (run_cli, combine_cli, report_cli):
        module.register(app)
    return app


APP = _app()


def cli(*args: str) -> Result:
    return CliRunner().invoke(APP, list(args))


def journal_of(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "journal.json").read_text())
    return data


def files_of(run: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(run.glob("measure-*.json"))}


# --------------------------------------------------------------------------- incomplete arms

# (case, the bad arm's faults, text added to the plan, the arms that end incomplete, the words
# their reason holds). The SHORT plan sends 8 generation requests before its quality phase.
ENDINGS = [
    ("server dies mid-measure", Faults(die_after=8), "", ["b"], "could not be read again"),
    ("server becomes another model", Faults(swap_model_after=6), "", ["b"], "truth-swapped"),
    (
        "cut by max_minutes",
        Faults(),
        "[stop]\nmax_minutes = 0.0005\n",  # 30 ms: no arm's decode phase fits
        ["a", "b", "a-again"],
        "max_minutes 0.0005 reached",
    ),
    (
        "interleaved, server dies",
        Faults(die_after=8),
        'order = "interleaved"\n',
        ["b"],
        "could not be read again",
    ),
]


@pytest.mark.parametrize(
    ("faults", "top", "short", "why"),
    [case[1:] for case in ENDINGS],
    ids=[case[0] for case in ENDINGS],
)
def test_every_way_an_arm_ends_incomplete_finishes_the_run_marked_not_looping(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    faults: Faults,
    top: str,
    short: list[str],
    why: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with running_truth_server(TIMING) as good, running_truth_server(TIMING, faults=faults) as bad:
        Path("plan.toml").write_text(two_arm_plan(good, bad, top=top))
        ran = cli("run", "plan.toml", "--out", "run")
    assert ran.exit_code == 3, ran.output
    assert "incomplete:" in ran.stderr and "--resume" not in ran.stderr
    run = tmp_path / "run"
    journal = journal_of(run)
    assert journal["state"] == "done"
    measure_steps = [step for step in journal["steps"] if step["kind"] == "measure"]
    for step in measure_steps:
        expected = "incomplete" if any(name in short for name in step["results"]) else "done"
        # The step's note in full (a dict's repr is cut in the report): a good arm refused a
        # figure on a busy host names the client rule, which pyproject's only_rerun runs again.
        assert step["state"] == expected, f"{step['label']}: {step.get('note')} {step}"
    assert [line.split(":")[0] for line in journal["incomplete"]] == short
    assert all(why in line for line in journal["incomplete"]), journal["incomplete"]

    comparison = json.loads((run / "compare.json").read_text())
    marks = dict(zip(comparison["names"], comparison["incomplete"], strict=True))
    for name, mark in marks.items():
        assert (mark is not None and f"{name} is incomplete" in mark) == (name in short), marks
    rows = {row["key"]: row["values"] for row in comparison["rows"]}
    measured = [name not in short for name in comparison["names"]]
    decode = dict(zip(comparison["names"], rows["decode_tokens_per_second"], strict=True))
    for name, complete in zip(comparison["names"], measured, strict=True):
        if complete:  # what was measured is shown
            assert decode[name] is not None and decode[name] > 0, decode
    report = (run / "report.md").read_text()
    assert all(f"{name} is incomplete" in report for name in short)

    # combine and report, given the run's files again, mark the arm and go on: written, and
    # exit 3 (a figure asked for is missing), as the run itself.
    paths = [str(run / f"measure-{name}.json") for name in comparison["names"]]
    combined = cli("combine", str(tmp_path / "again.json"), *paths)
    assert combined.exit_code == 3, combined.output
    for name in short:
        assert f"{name} (incomplete)" in combined.stdout
    (run / "measure-stray.json").write_bytes((run / f"measure-{short[0]}.json").read_bytes())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reported = cli("report", "run")
    assert reported.exit_code == 3, reported.output
    assert "note: left out measure-stray.json: compare.json names the run's files" in (
        reported.output
    )
    assert [str(w.message) for w in caught] == []  # no library warning on an arm without a line

    kept = files_of(run)
    resumed = cli("run", "--resume", "run")
    assert resumed.exit_code == 3, resumed.output
    lines = resumed.stdout.strip().splitlines()
    assert (
        len(lines) == 1 and "this run is finished" in lines[0] and "nothing to resume" in lines[0]
    )
    assert files_of(run) == kept and len(journal_of(run)["sessions"]) == 1


def test_an_arm_whose_server_is_gone_before_it_answers_fails_and_resume_says_it_repeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing measured is no result: the step fails (exit 1); a resume that fails at that
    step again says so, whatever the wording of its reason (the first session's names the
    streamed reply, the next's the connection)."""
    monkeypatch.chdir(tmp_path)
    with (
        running_truth_server(TIMING) as good,
        running_truth_server(TIMING, faults=Faults(die_after=1)) as dies,
    ):
        Path("plan.toml").write_text(two_arm_plan(good, dies))
        first = cli("run", "plan.toml", "--out", "run")
        assert first.exit_code == 1, first.output
        assert first.stderr.splitlines()[-2:] == [
            "measured so far: measure-a.json (`sagemeter report run` shows them)",
            "continue it with `sagemeter run --resume run`",
        ]
        again = cli("run", "--resume", "run")
    assert again.exit_code == 1, again.output
    assert again.stderr.splitlines()[-1].startswith("the session before failed at this step too")
    assert not (tmp_path / "run" / "measure-b.json").exists()  # a failure is never a figure


# --------------------------------------------------------------------------- plan paths


def _questions(path: Path, answer: str) -> Path:
    lines = [
        json.dumps({"family": "sums", "prompt": f"{n} + {answer}?", "answer": str(n)})
        for n in range(3)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _serve_script(folder: Path) -> Path:
    """`serve.sh` in `folder`: a calibrate-server, found only when run from that folder."""
    script = folder / "serve.sh"
    script.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m sagemeter calibrate-server --ttft 10ms '
        '--itl 2ms "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


# (plan key, what the plan writes, the frozen value from the plan folder `p`)
PATHS: list[tuple[str, str, Callable[[Path], str]]] = [
    ("measure.questions", "q.jsonl", lambda p: str(p / "q.jsonl")),
    ("measure.questions", "./sets/../q.jsonl", lambda p: str(p / "q.jsonl")),
    ('arm "b".target', "local:models/b.gguf", lambda p: f"local:{p / 'models' / 'b.gguf'}"),
    ('arm "b".target', "vllm:./hf/b", lambda p: f"vllm:{p / 'hf' / 'b'}"),
    ('arm "b".target', "local:smollm2-q4_1", lambda p: "local:smollm2-q4_1"),  # a name
]


@pytest.mark.parametrize(("key", "written", "frozen"), PATHS, ids=[p[1] for p in PATHS])
def test_every_plan_path_means_the_plan_folder_and_is_frozen(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    written: str,
    frozen: Callable[[Path], str],
) -> None:
    plans, elsewhere = tmp_path / "plans", tmp_path / "elsewhere"
    plans.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    questions = f'questions = "{written}"\n' if key == "measure.questions" else ""
    target_b = written if key != "measure.questions" else "http://127.0.0.1:9"
    plan_file = plans / "plan.toml"
    plan_file.write_text(two_arm_plan("http://127.0.0.1:9", target_b, measure=questions))
    plan, _ = load_plan(plan_file, ready=False)
    plan = freeze_paths(plan, plan_file.resolve().parent)
    value = plan.measure.questions if key == "measure.questions" else plan.arms[1].target
    assert value == frozen(plans.resolve())


def test_a_cmd_arm_runs_in_the_plan_folder_on_start_and_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cmd:./serve.sh` is the plan folder's script, typed from anywhere: the run and a resume
    from a third folder start it there (before, it was looked for in the current folder and the
    plan was refused as naming no program)."""
    plans, here, elsewhere = tmp_path / "plans", tmp_path / "here", tmp_path / "elsewhere"
    for folder in (plans, here, elsewhere):
        folder.mkdir()
    _serve_script(plans)
    serve = "cmd:./serve.sh --port {port}"  # A then B: an A' would only start it once more
    (plans / "plan.toml").write_text(two_arm_plan(serve, serve, top='order = "AB"\n'))
    monkeypatch.chdir(here)
    ran = cli("run", "../plans/plan.toml", "--out", "../run")
    assert ran.exit_code == 0, ran.output
    run = tmp_path / "run"
    journal = read_journal(run)
    assert journal.plan_folder == str(plans.resolve())
    assert journal.run_dir == str(run.resolve())
    log = (run / "engine-b.log").read_text()
    assert log.startswith("$ ./serve.sh --port ")

    # Stopped before its comparison, with b's file gone: resumed from elsewhere, b is measured
    # again by the plan folder's script.
    _as_stopped_before_combine(run)
    (run / "measure-b.json").unlink()
    monkeypatch.chdir(elsewhere)
    resumed = cli("run", "--resume", "../run")
    assert resumed.exit_code == 0, resumed.output
    assert read_journal(run).measured == ["a", "b", "b"]
    assert (run / "measure-b.json").is_file()


# --------------------------------------------------------------------------- resume checks


def _as_stopped_before_combine(run: Path) -> None:
    """The journal as a stop between the last measurement and the comparison leaves it."""
    data = journal_of(run)
    data["state"], data["stopped_because"] = "stopped", "interrupted"
    for step in data["steps"]:
        if step["kind"] in ("combine", "report"):
            step.update(state="pending", note=None, started_utc=None, ended_utc=None)
    (run / "journal.json").write_text(json.dumps(data, indent=2))
    for name in ("compare.json", "report.md", "report.html"):
        (run / name).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """One A-B-A run of the plan folder's questions, whole: (its folder, the server's URL)."""
    root = tmp_path_factory.mktemp("finished")
    plans = root / "plans"
    plans.mkdir()
    _questions(plans / "q.jsonl", "1")
    with running_truth_server(TIMING) as url:
        (plans / "plan.toml").write_text(two_arm_plan(url, url, measure='questions = "q.jsonl"\n'))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SAGEMETER_HOME", str(root / "home"))
            patch.setenv("COLUMNS", "200")
            ran = cli("run", str(plans / "plan.toml"), "--out", str(root / "run"))
        assert ran.exit_code == 0, ran.output
        yield root / "run", url


def _copy_run(source: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(source, to, ignore=shutil.ignore_patterns(".journal.lock"))
    return to


def _edit_plan(run: Path) -> str:
    plan = run / "plan.toml"
    plan.write_text(plan.read_text().replace("repeats = 2", "repeats = 5"))
    return "plan.toml: edited since the run started"


def _remove_plan(run: Path) -> str:
    (run / "plan.toml").unlink()
    return "plan.toml: missing; the run started from it"


def _edit_questions(run: Path) -> str:
    path = Path(read_journal(run).inputs[0].path)
    path.write_text(path.read_text().replace("+ 1?", "+ 3?"))
    return "(measure.questions): changed since the run started"


def _edit_result(run: Path) -> str:
    path = run / "measure-b.json"
    data = json.loads(path.read_text())
    data["decode_tokens_per_second"] = 1e6
    path.write_text(json.dumps(data))
    return "measure-b.json: changed since the run wrote it"


def _foreign_result(run: Path) -> str:
    """b's file replaced by another run's (the journal keeps no record of it, as if b had
    never been measured: its step is pending)."""
    data = journal_of(run)
    data["measured"].remove("b")
    del data["results"]["b"]
    for step in data["steps"]:
        if step["results"] == ["b"]:
            step.update(state="pending", note=None)
    (run / "journal.json").write_text(json.dumps(data, indent=2))
    return "measure-b.json: not written by this run"


CHANGES = [_edit_plan, _remove_plan, _edit_questions, _edit_result, _foreign_result]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__.strip("_") for c in CHANGES])
def test_resume_refuses_a_run_folder_that_changed_in_one_line_before_any_work(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    finished: tuple[Path, str],
    change: Callable[[Path], str],
) -> None:
    run = _copy_run(finished[0], tmp_path / "run")
    _as_stopped_before_combine(run)
    questions = Path(read_journal(run).inputs[0].path)
    original_questions = questions.read_text()
    try:
        said = change(run)
        before = (run / "journal.json").read_bytes()
        for extra in ([], ["--dry-run"]):
            refused = cli("run", "--resume", str(run), *extra)
            assert refused.exit_code == 2, refused.output
            lines = refused.stderr.splitlines()
            assert len(lines) == 1 and said in lines[0], refused.stderr
        assert (run / "journal.json").read_bytes() == before  # nothing ran
        assert not (run / "compare.json").exists()
    finally:
        questions.write_text(original_questions)  # the module's run shares it


# The deleted file, then the time order, the order stated, and whether A-A' brackets B.
DELETED = [
    ("a", ["b", "a-again", "a"], "BAA", False),
    ("b", ["a", "a-again", "b"], "AAB", False),
    ("a-again", ["a", "b", "a-again"], "ABA", True),
]


@pytest.mark.parametrize(("deleted", "time_order", "order", "drift"), DELETED)
def test_a_result_deleted_before_resume_is_measured_again_and_the_order_is_the_time_order(
    tmp_path: Path,
    finished: tuple[Path, str],
    deleted: str,
    time_order: list[str],
    order: str,
    drift: bool,
) -> None:
    run = _copy_run(finished[0], tmp_path / "run")
    _as_stopped_before_combine(run)
    (run / f"measure-{deleted}.json").unlink()
    resumed = cli("run", "--resume", str(run))
    assert resumed.exit_code == 0, resumed.output
    journal = read_journal(run)
    assert journal.measured == ["a", "b", "a-again", deleted]
    assert journal.results is not None
    assert journal.results[deleted] == sha256_of(run / f"measure-{deleted}.json")
    comparison = json.loads((run / "compare.json").read_text())
    assert comparison["names"] == ["a", "b", "a-again"]
    assert comparison["time_order"] == time_order
    assert comparison["order"] == order
    report = (run / "report.md").read_text()
    if drift:
        assert comparison["order_note"] is None and comparison["drift"] is not None
        assert "A-B-A drift" in resumed.stdout
    else:
        assert comparison["order_note"].startswith(f"planned ABA, measured {', '.join(time_order)}")
        assert comparison["drift"] is None and comparison["drift_note"].startswith("no A-A' drift")
        assert f"Measured in the order {order} (planned ABA" in report
        assert "A-B-A drift" not in resumed.stdout


@pytest.mark.parametrize("with_compare", [True, False], ids=["compare.json", "journal only"])
def test_a_run_folders_report_is_the_runs_files_not_every_measure_file(
    tmp_path: Path, finished: tuple[Path, str], with_compare: bool
) -> None:
    """`report DIR` of a run folder follows compare.json's list, or, stopped before its
    comparison, the journal's: a stray measure-*.json is left out and the note says so."""
    run = _copy_run(finished[0], tmp_path / "run")
    if not with_compare:
        _as_stopped_before_combine(run)
    (run / "measure-stray.json").write_bytes((run / "measure-b.json").read_bytes())
    reported = cli("report", str(run))
    assert reported.exit_code == 0, reported.output
    named_by = "compare.json" if with_compare else "journal.json"
    assert (
        f"note: left out measure-stray.json: {named_by} names the run's files (measure-a.json, "
        "measure-b.json, measure-a-again.json)" in reported.output
    )
    report = (run / "report.md").read_text()
    assert "Order of runs (as " in report and ": a → b → a-again." in report
    assert "A-B-A" in report  # the journal's time order brackets b: the drift is given


async def test_the_mcp_face_finishes_an_incomplete_run_and_refuses_a_changed_folder(
    tmp_path: Path,
) -> None:
    """run_experiment: the dying arm ends incomplete (said, not an error), a resume of the
    finished run runs nothing, and a result edited since is refused in one sentence."""
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line, ok, text_of

    results = tmp_path / "results"
    results.mkdir()
    with (
        running_truth_server(TIMING) as good,
        running_truth_server(TIMING, faults=Faults(die_after=8)) as dies,
    ):
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            ran = await client.call_tool("run_experiment", {"plan": two_arm_plan(good, dies)})
            answer = ok(ran)
            assert answer["state"] == "done"
            assert [line.split(":")[0] for line in answer["incomplete"]] == ["b"]
            assert "measure b: incomplete" in text_of(ran)
            run = Path(answer["run_dir"])
            again = await client.call_tool("run_experiment", {"resume": run.name})
            assert ok(again)["state"] == "done"
            assert "this run is finished, b incomplete" in text_of(again)
            assert len(read_journal(run).sessions) == 1  # nothing ran again
            _edit_result(run)
            refused = await client.call_tool("run_experiment", {"resume": run.name})
    assert "measure-b.json: changed since the run wrote it" in error_line(refused)


def test_an_interleaved_arm_measured_again_alone_is_stated_in_its_time_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with running_truth_server(TIMING) as url:
        Path("plan.toml").write_text(two_arm_plan(url, url, top='order = "interleaved"\n'))
        assert cli("run", "plan.toml", "--out", "run").exit_code == 0
        run = tmp_path / "run"
        assert json.loads((run / "compare.json").read_text())["order"] == "interleaved"
        _as_stopped_before_combine(run)
        (run / "measure-a.json").unlink()
        resumed = cli("run", "--resume", "run")
    assert resumed.exit_code == 0, resumed.output
    comparison = json.loads((run / "compare.json").read_text())
    assert comparison["order"] == "BA"
    assert comparison["order_note"].endswith("a measured again on resume without the others, "
                                             "their requests not in turn")  # fmt: skip
    report = (run / "report.md").read_text()
    assert "Measured in the order BA (planned interleaved" in report
    assert "Measured interleaved" not in report


def test_a_cmd_arms_plan_folder_gone_before_resume_is_one_line(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    _serve_script(plans)
    (plans / "plan.toml").write_text(
        two_arm_plan("cmd:./serve.sh --port {port}", "http://127.0.0.1:9")
    )
    plan, text = load_plan(plans / "plan.toml")
    from sagemeter.experiment import start_run

    run = tmp_path / "run"
    start_run(
        freeze_paths(plan, plans), out=run, plan_text=text, plan_source="p", plan_folder=plans
    )
    (plans / "serve.sh").unlink()
    (plans / "plan.toml").unlink()
    plans.rmdir()
    refused = cli("run", "--resume", str(run))
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.splitlines() == [
        f"error: arm \"a\".target: {plans.resolve()}: the plan's folder, where this cmd: arm's "
        "command runs, is gone; restore it, or start a new run"
    ]


def test_an_interleaved_step_cut_after_its_first_arm_resumes_and_resumes_again(
    tmp_path: Path,
) -> None:
    """The session before wrote a's file in the same second its step began (a result keeps its
    start to the second, the step to the millisecond), then stopped before b: the resume takes
    a as the run's own, measures b, and keeps a's digest, so a later resume is not refused."""
    plans = tmp_path / "plans"
    plans.mkdir()
    _questions(plans / "q.jsonl", "1")
    with running_truth_server(TIMING) as url:
        plan = two_arm_plan(url, url, 'order = "interleaved"\n', 'questions = "q.jsonl"\n')
        (plans / "plan.toml").write_text(plan)
        run = tmp_path / "run"
        assert cli("run", str(plans / "plan.toml"), "--out", str(run)).exit_code == 0
        # As a stop during b leaves it: a written (no digest yet), b not, the step stopped.
        data = journal_of(run)
        a_began = json.loads((run / "measure-a.json").read_text())["detail"]["environment"][
            "started_utc"
        ]
        assert a_began.endswith("Z") and "." not in a_began  # kept to the second
        data["results"], data["measured"] = {}, []
        for step in data["steps"]:
            if step["kind"] == "measure":
                step.update(state="stopped", note=None, started_utc=a_began[:-1] + ".900Z")
        (run / "journal.json").write_text(json.dumps(data, indent=2))
        _as_stopped_before_combine(run)
        (run / "measure-b.json").unlink()

        second = cli("run", "--resume", str(run))
        assert second.exit_code == 0, second.output
        kept = read_journal(run)
        assert kept.results is not None and set(kept.results) == {"a", "b"}
        assert kept.measured[:2] == ["a", "b"]  # a was measured first, then b

        _as_stopped_before_combine(run)
        third = cli("run", "--resume", str(run))
        assert third.exit_code == 0, third.output
