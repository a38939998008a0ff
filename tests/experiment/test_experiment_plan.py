"""Plan files: every problem is one line naming its key, before anything starts; the steps and
names an order makes; the demo as a built-in plan; what the journal counts as spent."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.experiment import combine_order, parse_plan, plan_steps
from sagemeter.experiment.journal import Journal
from sagemeter.platforms.deployment import Deployment
from sagemeter.sagemaker.plan_arms import endpoint_name

TWO_ARMS = """name = "pair"

[[arm]]
name = "a"
target = "local:smollm2-f32"

[[arm]]
name = "b"
target = "local:smollm2-q4_1"
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("nmae = 1\n" + TWO_ARMS, "plan.toml: nmae: unknown key"),
        (
            TWO_ARMS + '\n[[arm]]\nname = "c"\ntargte = "local:smollm2-f32"\n',
            'plan.toml: arm "c".targte: unknown key',
        ),
        (
            TWO_ARMS + '\n[[arm]]\nname = "c"\n[arm.sagemaker]\nmodle = "x"\n',
            'plan.toml: arm "c".sagemaker.modle: unknown key (did you mean model?)',
        ),
        (
            TWO_ARMS + '\n[[arm]]\nname = "c"\n',
            'plan.toml: arm "c": give target = "…" (an endpoint that runs already) or an '
            "[arm.sagemaker] table",
        ),
        (
            TWO_ARMS + '\n[[arm]]\nname = "a"\ntarget = "http://127.0.0.1:9"\n',
            'plan.toml: arm[3].name: "a" is already the name of arm[1]; every arm needs its own '
            "name",
        ),
        (
            TWO_ARMS + "\n[measure]\nlong-tokens = 4\nshort-tokens = 8\n",
            "plan.toml: measure.long_tokens must be larger than measure.short_tokens",
        ),
        (
            TWO_ARMS + "\n[measure]\nrepeats = 0\n",
            "plan.toml: measure.repeats: Input should be greater than 0",
        ),
        ('order = "ABC"\n' + TWO_ARMS, "plan.toml: order: 'ABC' names arm C, but the plan has "),
        ('order = "BAB"\n' + TWO_ARMS, "plan.toml: order: 'BAB' must start with A"),
        ('order = "AAA"\n' + TWO_ARMS, "plan.toml: order: 'AAA' never measures arm B"),
        (TWO_ARMS.replace('"local:smollm2-q4_1"', '"local:nope"'), 'arm "b".target: '),
        (TWO_ARMS + "\n[measure]\nquestions = 'no-such-set'\n", "no-such-set"),
    ],
)
def test_a_bad_plan_is_one_line_naming_the_key(
    text: str, line: str, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "plan.toml").write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "sagemeter", "run", "plan.toml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**sagemeter_env, "COLUMNS": "300"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = [each for each in done.stderr.splitlines() if each.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert line in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing started, no run folder


SIX_PROBLEMS = """name = "six"
colour = "blue"

[measure]
repeats = 0
questions = "missing.jsonl"

[[arm]]
name = "a"
target = "local:nope"

[[arm]]
name = "a"
target = "http://127.0.0.1:9"

[[arm]]
name = "c"
targte = "http://127.0.0.1:9"
"""

SIX_LINES = [
    "colour: unknown key",
    # the [measure] table is checked by measure's options model, bounds and all, in plan order
    "measure.repeats: Input should be greater than 0",
    'arm "c".targte: unknown key',
    'arm[2].name: "a" is already the name of arm[1]; every arm needs its own name',
    "arm \"a\".target: unknown checkpoint 'nope'; use one of smollm2-q4_1, smollm2-f32 or a "
    "path to a .gguf file",
    "measure.questions: question set 'missing.jsonl' is neither built in (article-40, "
    "bank-1000) nor a file",
]


@pytest.mark.slow
@pytest.mark.parametrize("dry_run", [False, True])
def test_every_problem_of_a_plan_is_one_line_in_one_run(
    dry_run: bool, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "plan.toml").write_text(SIX_PROBLEMS)
    done = subprocess.run(
        [sys.executable, "-m", "sagemeter", "run", "plan.toml", *(["--dry-run"] * dry_run)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**sagemeter_env, "COLUMNS": "300"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    # The questions file is looked for where the run reads it: in the plan file's folder.
    where = str(tmp_path.resolve() / "missing.jsonl")
    assert done.stderr.splitlines() == [
        "error: plan.toml: 6 problems, one a line:",
        *("  " + line.replace("'missing.jsonl'", repr(where)) for line in SIX_LINES),
    ]
    assert not (tmp_path / "runs").exists()  # nothing started, no run folder


def test_a_plan_without_what_running_needs_is_still_checked_whole() -> None:
    """Resuming reads the plan without its targets and files (they are checked when the run
    starts); the problems of the plan itself still come all at once."""
    with pytest.raises(UserError) as caught:
        parse_plan(SIX_PROBLEMS, "p.toml")
    assert str(caught.value).splitlines()[1:] == [f"  {line}" for line in SIX_LINES[:4]]
    with pytest.raises(UserError) as ready:
        parse_plan(SIX_PROBLEMS, "p.toml", ready=True)
    assert str(ready.value).splitlines()[0] == "p.toml: 6 problems, one a line:"


@pytest.mark.slow
def test_command_line_misuse_is_one_line(sagemeter_env: dict[str, str], tmp_path: Path) -> None:
    for args, needle in (
        ([], "give a PLAN file, or --resume RUN_DIR"),
        (["plan.toml"], "plan.toml: no such plan file"),
        (["--resume", "nowhere"], "nowhere: no such run folder"),
        (["--resume", "."], "holds no journal.json"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "sagemeter", "run", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, **sagemeter_env, "COLUMNS": "300"},
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, (args, done.stderr)
        assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_orders_make_steps_and_result_names() -> None:
    plan = parse_plan(TWO_ARMS)
    assert plan.order_text == "ABA"
    assert [step.label for step in plan_steps(plan)] == [
        "measure a",
        "measure b",
        "measure a-again",
        "combine",
        "report",
    ]
    assert combine_order(plan) == ["a", "b", "a-again"]

    abab = parse_plan('order = "ABABA"\n' + TWO_ARMS)
    # the baseline's last repeat goes last, so the drift spans the whole run
    assert combine_order(abab) == ["a", "b", "a-again", "b-again", "a-again-2"]

    three = parse_plan(TWO_ARMS + '\n[[arm]]\nname = "c"\ntarget = "http://127.0.0.1:9"\n')
    assert three.order_text == "ABCA"

    cloud = parse_plan(
        TWO_ARMS.replace('target = "local:smollm2-f32"', '[arm.sagemaker]\nmodel = "m/x"')
    )
    assert [step.label for step in plan_steps(cloud)][:4] == [
        "deploy a",
        "measure a",
        "delete a",
        "measure b",
    ]
    assert endpoint_name(cloud, cloud.arms[0]) == "pair-a"

    interleaved = parse_plan('order = "interleaved"\n' + TWO_ARMS)
    assert [step.label for step in plan_steps(interleaved)] == [
        "measure a, b (interleaved)",
        "combine",
        "report",
    ]


def test_interleaved_refuses_fidelity_and_toml_errors_say_where() -> None:
    with pytest.raises(UserError, match=r'measure.fidelity: not with order = "interleaved"'):
        parse_plan('order = "interleaved"\n' + TWO_ARMS + "\n[measure]\nfidelity = 2\n")
    with pytest.raises(UserError, match=r"not valid TOML: .*line 3"):
        parse_plan('name = "x"\n\n[[arm]\n')
    with pytest.raises(UserError, match="at least two arms"):
        parse_plan('name = "x"\n[[arm]]\nname = "a"\ntarget = "local:a"\n')


def test_the_demo_is_a_built_in_plan_with_the_demo_settings() -> None:
    from sagemeter.experiment.demo import demo_plan
    from sagemeter.settings import demo_settings, quick_settings

    plan = demo_plan(False)
    assert plan.settings() == demo_settings()
    assert combine_order(plan) == ["smollm2-f32", "smollm2-q4_1", "smollm2-f32-again"]
    quick = demo_plan(True, {"questions_per_family": 1, "fidelity": 2})
    assert quick.settings() == quick_settings().model_copy(
        update={"questions_per_family": 1, "fidelity_prompts": 2}
    )
    with pytest.raises(UserError, match=r"^--margin: Input should be greater than 0$"):
        demo_plan(False, {"margin": -1})


def test_the_demo_writes_the_plan_it_runs_as_toml_that_run_reads_back(tmp_path: Path) -> None:
    from sagemeter.experiment import start_run
    from sagemeter.experiment.demo import demo_plan, demo_plan_text

    for plan in (demo_plan(False), demo_plan(True, {"questions": "bank-1000", "margin": 2.5})):
        text = demo_plan_text(plan)
        assert text.startswith("# The demo's plan") and "sagemeter run plan.toml" in text
        assert parse_plan(text) == plan
    prepared = start_run(plan, out=tmp_path / "demo", plan_text=text, plan_source="demo")
    assert (prepared.run_dir / "plan.toml").read_text() == text


def test_the_journal_counts_each_endpoint_from_its_deploy_to_its_deletion() -> None:
    began = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

    def stamp(minutes: float) -> str:
        return (began + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")

    deleted = Deployment(result="a", arm="a", endpoint="e", regions=["us-east-2"],
                         instance_types=["ml.g6.xlarge"], hourly_usd=1.2, count=2,
                         started_utc=stamp(0), deleted_utc=stamp(30), state="deleted")  # fmt: skip
    live = Deployment(result="b", arm="b", endpoint="f", regions=["us-east-2"],
                      instance_types=["ml.g6.xlarge"], hourly_usd=None,
                      started_utc=stamp(0), state="live")  # fmt: skip
    journal = Journal(name="x", run_dir="r", plan={}, plan_source="t", deployments=[deleted, live])
    spent, unpriced = journal.cost(began + timedelta(hours=5))
    assert spent == pytest.approx(1.2 * 2 * 0.5)  # the deleted one stopped counting at deletion
    assert unpriced == ["f@us-east-2"]
    assert [d.record["endpoint"] for d in journal.live_deployments()] == ["f"]
    assert [d.platform for d in journal.deployments] == ["sagemaker", "sagemaker"]


def test_vllm_arms_are_planned_with_their_start_and_local_arms_priced_while_measured() -> None:
    from sagemeter.engines.registry import engine_named
    from sagemeter.experiment.estimate import estimate, measure_seconds
    from sagemeter.targets import VllmTarget

    local_start_s = engine_named("local").start_seconds  # type: ignore[union-attr]
    vllm_start_s = engine_named("vllm").start_seconds  # type: ignore[union-attr]

    text = TWO_ARMS.replace('"local:smollm2-q4_1"', '"vllm:smollm2-f32"')
    plan = parse_plan(text)
    assert plan.arms[1].parsed_target() == VllmTarget("smollm2-f32")
    planned = estimate(plan, {})
    measured = measure_seconds(plan.settings(), plan.estimate.tokens_per_second)
    minutes = {row.label: row.minutes for row in planned.steps}
    assert minutes["measure a"] == round((measured + local_start_s) / 60, 1)
    assert minutes["measure b"] == round((measured + vllm_start_s) / 60, 1)
    assert planned.usd == 0 and all(row.usd is None for row in planned.steps)  # no price given

    priced = estimate(parse_plan("price_per_hour = 3.6\n" + text), {})
    seconds = 3 * measured + 2 * local_start_s + vllm_start_s  # a, b, a-again
    assert priced.usd == pytest.approx(3.6 * seconds / 3600, abs=0.01)
    assert [row.usd is not None for row in priced.steps] == [True, True, True, False, False]


def test_ray_in_a_plan_is_checked_like_measure_ray() -> None:
    plan = parse_plan(TWO_ARMS + '\n[measure]\nray = "10.0.3.17:6379"\n')
    assert plan.measure.ray == "10.0.3.17:6379"
    assert plan.settings() == parse_plan(TWO_ARMS).settings()  # where batches run, not how
    assert parse_plan(TWO_ARMS + "\n[measure]\nray = 'ray://head:10001'\n").measure.ray
    with pytest.raises(UserError, match=r"^plan: measure.ray: 'nowhere': give auto"):
        parse_plan(TWO_ARMS + '\n[measure]\nray = "nowhere"\n')
    cloud = TWO_ARMS.replace('target = "local:smollm2-f32"', '[arm.sagemaker]\nmodel = "m/x"')
    with pytest.raises(UserError, match=r'measure.ray: arm "a" is a SageMaker endpoint'):
        parse_plan(cloud + '\n[measure]\nray = "auto"\n')
    with pytest.raises(UserError, match=r'measure.ray: arm "b" is a SageMaker endpoint'):
        parse_plan(
            TWO_ARMS.replace("local:smollm2-q4_1", "gemma@us-east-2")
            + "\n[measure]\nray = 'auto'\n"
        )


def test_a_sagemaker_arm_is_planned_with_its_metrics_wait() -> None:
    """The measure step of a SageMaker arm waits (at most) --metrics-wait for CloudWatch while
    the endpoint bills: the estimate counts it; an engine arm has no such wait."""
    from sagemeter.engines.registry import engine_named
    from sagemeter.experiment.estimate import estimate, measure_seconds

    local_start_s = engine_named("local").start_seconds  # type: ignore[union-attr]
    text = TWO_ARMS.replace("local:smollm2-q4_1", "gemma@us-east-2")
    for options, wait_s in (("", 180.0), ('\n[measure]\nmetrics_wait = "30s"\n', 30.0)):
        plan = parse_plan(text + options)
        assert plan.settings().metrics_wait_s == wait_s
        measured = measure_seconds(plan.settings(), plan.estimate.tokens_per_second)
        minutes = {row.label: row.minutes for row in estimate(plan, {}).steps}
        assert minutes["measure a"] == round((measured + local_start_s) / 60, 1)
        assert minutes["measure b"] == round((measured + wait_s) / 60, 1)


def test_an_slo_table_is_checked_and_written_back() -> None:
    plan = parse_plan(TWO_ARMS + '\n[slo]\nttft = "500ms"\ntpot = 0.05\nmax-tokens = 64\n')
    assert plan.slo is not None
    assert (plan.slo.ttft, plan.slo.tpot, plan.slo.percentile) == (0.5, 0.05, 99.0)
    assert plan.slo.max_tokens == 64 and plan.slo.search == "concurrency"
    from sagemeter.experiment.plan_toml import plan_toml

    assert parse_plan(plan_toml(plan.to_data())).slo == plan.slo  # the journal's copy reads back
    for table, line in (
        ("percentile = 99", "slo: give ttft, tpot or both"),
        ('ttft = "1s"\npercentile = 95', "slo.percentile: give 50, 90 or 99 (the percentiles"),
        ('ttft = "1s"\nsearch = "rate"', "slo: search = rate starts at `rate`"),
        ('ttft = "1s"\nburstiness = 2', "slo: burstiness shapes the arrivals of search = rate"),
        ('ttft = "1s"\nconcurrency = 0', "slo.concurrency: Input should be greater than or"),
        ('ttft = "soon"', "slo.ttft: "),
        ('ttft = "1s"\nslots = 4', "slo.slots: unknown key"),
    ):
        with pytest.raises(UserError, match=re.escape(line)):
            parse_plan(TWO_ARMS + f"\n[slo]\n{table}\n")
    cloud = TWO_ARMS.replace('target = "local:smollm2-f32"', '[arm.sagemaker]\nmodel = "m/x"')
    with pytest.raises(UserError, match=r'slo: arm "a" is a SageMaker endpoint'):
        parse_plan(cloud + '\n[slo]\nttft = "1s"\n')
