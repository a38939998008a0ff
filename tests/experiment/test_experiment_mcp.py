"""run_experiment through the real MCP client against the server.

The plan's two arms are the same calibrate-server by its URL (nothing to start per arm, and it
answers in milliseconds: the engine's own figures are other tests' business); what is checked is
the tool: the run folder in the results folder, progress notifications, resume, and its guards
(--allow-write for a plan that deploys, paths only inside the results folder).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.experiment import parse_plan, read_journal, start_run
from sagemeter.experiment.frozen import sha256_of
from sagemeter.mcp import ServerConfig, build_server
from tests.conftest import reference_file
from tests.mcp_helpers import Progress, error_line, ok, text_of

PLAN = """name = "pair"

[measure]
short-tokens = 4
long-tokens = 24
repeats = 2
levels = [1, 2]
load-tokens = 8
batches = 1
questions-per-family = 1
quality-max-tokens = 8
prefill-tokens = "none"

[[arm]]
name = "a"
target = "{url}"

[[arm]]
name = "b"
target = "{url}"
"""

SAGEMAKER_PLAN = """name = "cloud"
max_cost_usd = 10

[[arm]]
name = "bf16"
[arm.sagemaker]
model = "google/gemma-4-E2B-it"
region = "us-east-2"
role = "arn:aws:iam::123456789012:role/sagemeter-test-role"

[[arm]]
name = "local"
target = "local:smollm2-q4_1"
"""


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    """Replies of about 100 ms: long enough that the client's own gap between requests stays far
    under load's 1% validity bound, so no arm is incomplete on a busy host; 20 µs per prompt
    token gives a prefill phase a rate to find (PLAN leaves that phase out: the tool, not the
    figures, is what is checked here, and it took 2.8 s of the test's 10.3)."""
    with running_truth_server(TruthTiming(ttft_s=0.05, itl_s=0.01, prefill_s=20e-6)) as url:
        yield url


@pytest.mark.slow
async def test_run_experiment_runs_a_plan_and_resumes_it(truth_url: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        progress = Progress()
        result = await client.call_tool(
            "run_experiment", {"plan": PLAN.format(url=truth_url)}, progress_callback=progress
        )
        answer = ok(result)
        assert answer["state"] == "done", text_of(result)
        run_dir = Path(answer["run_dir"])
        assert run_dir.parent == results / "runs" and run_dir.name.endswith("-pair")
        expected = {"measure-a.json", "measure-b.json", "measure-a-again.json", "compare.json"}
        assert expected | {"journal.json", "plan.toml", "report.md"} <= set(answer["files"])
        assert [step["state"] for step in answer["steps"]] == ["done"] * 5, answer["steps"]
        values = [value for value, _, _ in progress.seen]
        assert values == sorted(set(values))
        messages = [message or "" for _, _, message in progress.seen]
        assert "[1/5] measure a …" in messages
        assert any(m.startswith("a: quality") and m.endswith("requests") for m in messages)
        assert any(m.startswith("[5/5] report done") for m in messages)
        assert "A-B-A drift (a → a-again)" in text_of(result)

        kept = (run_dir / "measure-a.json").read_bytes()
        resumed = ok(await client.call_tool("run_experiment", {"resume": run_dir.name}))
        assert resumed["state"] == "done"
        assert (run_dir / "measure-a.json").read_bytes() == kept


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS credentials anywhere (and no metadata service to ask)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


async def test_run_experiment_guards_writes_and_paths(tmp_path: Path, no_aws: None) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "cloud.toml").write_text(SAGEMAKER_PLAN)
    (tmp_path / "outside.toml").write_text(SAGEMAKER_PLAN)
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        refused = await client.call_tool("run_experiment", {"plan": SAGEMAKER_PLAN})
        assert "--allow-write" in error_line(refused)
        assert not (results / "runs").exists()

        planned = ok(
            await client.call_tool("run_experiment", {"plan_file": "cloud.toml", "dry_run": True})
        )
        assert planned["state"] == "planned" and planned["dry_run"]
        labels = [row["label"] for row in planned["estimate"]["steps"]]
        assert labels[:4] == ["deploy bf16", "measure bf16", "delete bf16", "measure local"]
        assert planned["estimate"]["unpriced"] == ["bf16"]  # no credentials to look it up
        assert planned["problem"].startswith("max_cost_usd: cannot be checked")

        outside = await client.call_tool("run_experiment", {"plan_file": "../outside.toml"})
        assert "other paths are never read" in error_line(outside)
        both = await client.call_tool(
            "run_experiment", {"plan": SAGEMAKER_PLAN, "plan_file": "cloud.toml"}
        )
        assert "exactly one of plan" in error_line(both)
        bad = await client.call_tool("run_experiment", {"plan": "nme = 1\n" + SAGEMAKER_PLAN})
        assert error_line(bad) == "plan: nme: unknown key"
        many = await client.call_tool(
            "run_experiment", {"plan": "nme = 1\norder = 'BA'\n" + SAGEMAKER_PLAN}
        )
        assert error_line(many) == (  # every problem, in one sentence
            "plan: 2 problems: nme: unknown key; order: 'BA' must start with A (the baseline, "
            "arm 1)"
        )
        missing = await client.call_tool("run_experiment", {"resume": "no-such-run"})
        assert "no such run folder" in error_line(missing)


NAMED_PLAN = """name = "named"

[measure]
questions = "{questions}"

[[arm]]
name = "a"
target = "http://127.0.0.1:9"

[[arm]]
name = "b"
target = "{target}"
"""

QUESTION = '{"prompt": "2+2?", "answer": "4", "family": "x"}\n'


def _same_refusal(lines: dict[str, str]) -> str:
    """The one refusal all `lines` share once the path each names is taken out."""
    shapes = {line.replace(repr(path[:60]), "PATH") for path, line in lines.items()}
    assert len(shapes) == 1, shapes  # nothing in the wording says whether the path exists
    shape = shapes.pop()
    assert "other paths are never read" in shape and "PATH" in shape
    return shape


@pytest.mark.timeout(120)  # a FIFO opened by mistake would block here, not pass
async def test_run_experiment_reads_plan_files_only_by_name(tmp_path: Path, no_aws: None) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "mine.jsonl").write_text(QUESTION)
    (tmp_path / "outside.jsonl").write_text(QUESTION)
    (tmp_path / "real.gguf").write_bytes(b"GGUF")
    (tmp_path / "hf-folder").mkdir()
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    questions = ["/etc/hostname", str(tmp_path / "outside.jsonl"), "/no/such.jsonl", str(fifo),
                 "../outside.jsonl"]  # fmt: skip
    checkpoints = {
        "local:": [str(tmp_path / "real.gguf"), "/no/such.gguf"],
        "vllm:": [str(tmp_path / "hf-folder"), "/no/such-folder", str(tmp_path / "real.gguf")],
    }
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        for dry_run in (False, True):
            lines = {}
            for path in questions:
                plan = NAMED_PLAN.format(questions=path, target="http://127.0.0.1:9")
                answer = await client.call_tool(
                    "run_experiment", {"plan": plan, "dry_run": dry_run}
                )
                lines[path] = error_line(answer)
            assert _same_refusal(lines).startswith("plan: measure.questions PATH: give a built-in")
            for prefix, paths in checkpoints.items():
                lines = {}
                for path in paths:
                    plan = NAMED_PLAN.format(questions="mine.jsonl", target=f" {prefix}{path}")
                    answer = await client.call_tool(
                        "run_experiment", {"plan": plan, "dry_run": dry_run}
                    )
                    lines[path] = error_line(answer)
                shape = _same_refusal(lines)
                assert shape.startswith('plan: arm "b".target: checkpoint PATH: give ')
        # The same rules for a plan file in the folder.
        (results / "outside.toml").write_text(
            NAMED_PLAN.format(questions="/etc/hostname", target="http://127.0.0.1:9")
        )
        line = error_line(await client.call_tool("run_experiment", {"plan_file": "outside.toml"}))
        assert line.startswith("outside.toml: measure.questions '/etc/hostname': give a built-in")
        assert not (results / "runs").exists()

        # By name, from the folder, the plan is taken.
        plan = NAMED_PLAN.format(questions="mine.jsonl", target="http://127.0.0.1:9")
        planned = ok(await client.call_tool("run_experiment", {"plan": plan, "dry_run": True}))
        assert planned["state"] == "planned"

    # A run folder in the results folder whose plan names a path elsewhere (made by the command
    # line, say) is refused on resume; the folder's own files, as a run here stores them, are not.
    runs = results / "runs"
    for name, path in [("theirs", tmp_path / "outside.jsonl"), ("ours", results / "mine.jsonl")]:
        start_run(
            parse_plan(NAMED_PLAN.format(questions=path, target="http://127.0.0.1:9")),
            out=runs / name,
            plan_text=None,
            plan_source="test",
        )
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        theirs = await client.call_tool("run_experiment", {"resume": "theirs", "dry_run": True})
        assert error_line(theirs).startswith("runs/theirs: measure.questions ")
        assert "other paths are never read" in error_line(theirs)
        ours = ok(await client.call_tool("run_experiment", {"resume": "ours", "dry_run": True}))
        assert ours["state"] == "planned"


@pytest.mark.slow
async def test_the_run_s_report_leaves_out_a_stray_result_file(
    tmp_path: Path, no_aws: None
) -> None:
    """run_experiment's report (the MCP face of `report`) follows the run's compare.json: a
    stray measure-*.json dropped into the run folder is left out, and the report says so."""
    from tests.report_parse import FIXED_RUN, md_sections

    results = tmp_path / "results"
    run_dir = results / "runs" / "stray"
    plan = NAMED_PLAN.format(questions="article-40", target="http://127.0.0.1:9")
    start_run(parse_plan(plan), out=run_dir, plan_text=None, plan_source="test")
    # Every visit measured before (A, B, A′): only the comparison and the report are left.
    for mine, fixed in [
        ("a", "smollm2-f32"),
        ("b", "smollm2-q4_1"),
        ("a-again", "smollm2-f32-again"),
    ]:
        (run_dir / f"measure-{mine}.json").write_bytes(
            (FIXED_RUN / f"measure-{fixed}.json").read_bytes()
        )
    # As the run records what it measured (a file it did not write is refused on resume).
    journal = read_journal(run_dir)
    for step in journal.steps:
        step.state = "done" if step.kind == "measure" else step.state
    journal.measured = ["a", "b", "a-again"]
    journal.results = {
        name: sha256_of(run_dir / f"measure-{name}.json") for name in journal.measured
    }
    journal.save(run_dir)
    stray = "measure-gemma-4-e2b.json"
    (run_dir / stray).write_bytes(reference_file(stray).read_bytes())
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        done = ok(await client.call_tool("run_experiment", {"resume": "stray"}))
    assert done["state"] == "done", done
    compared = md_sections((run_dir / "report.md").read_text())["What was compared"]
    assert f"Left out {stray}: compare.json names the run's files" in compared
    assert "gemma" not in compared.replace(stray, "")
