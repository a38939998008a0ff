"""The suite's one rerun rule: a test runs again only when sagemeter said its client fell behind.

On a shared two-core host a batch's client can lag for a moment (another test's engine takes the
CPU) and sagemeter rightly refuses that batch's figure. pyproject.toml's pytest settings run such
a test again; any other failure must fail at once. These tests hold the settings to that, with the
project's own settings, in an inner pytest run.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import click
import pytest
import typer
import typer.testing
from click.testing import CliRunner

from sagemeter.loadgen import health as load_health
from sagemeter.measure.agreement import level_doubt_from_above
from sagemeter.measure.decode import client_bound
from sagemeter.request_record import RequestRecord
from sagemeter.results.model import ClientShare
from sagemeter.transport import health as wire_health
from sagemeter.transport.token_check import disagreement_note
from tests.busy_host import CLIENT_LIMITS, assert_complete_or_busy, assert_decode_rate_or_busy
from tests.cli_run import Completed

pytest_plugins = ("pytester",)

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
RERUN_KEYS = ("reruns", "reruns_delay", "only_rerun")


def _settings() -> dict[str, object]:
    return tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]


def test_only_the_rules_that_say_the_client_fell_behind_are_run_again() -> None:
    settings = _settings()
    assert settings["only_rerun"] == list(CLIENT_LIMITS)
    for rule in CLIENT_LIMITS:  # each is a rule the product names in its reasons
        assert hasattr(wire_health, rule) or hasattr(load_health, rule), rule
    assert int(str(settings["reruns"])) == 2


def _incomplete(reasons: list[str]) -> dict[str, object]:
    return {"complete": False, "incomplete_because": reasons, "decode_tokens_per_second": None}


def test_a_busy_host_answer_is_a_stall_or_the_clients_pace_and_nothing_else() -> None:
    """The reasons tests/busy_host.py accepts in place of a figure, made by the product's own
    rules: a stall that stayed (agreement.py) or a saturated client (decode.py). Any other
    reason is a failure, even one that says "disagree" (usage against content events)."""
    stall = level_doubt_from_above(4, 10.0, [(8, 100.0)])
    assert stall is not None
    saturated = ClientShare(
        calls=8, client_cpu_s=0.95, timed_wall_s=1.0, cpu_per_call_ms=1.0, share=0.95
    )
    busy = [stall, *client_bound(saturated)]
    assert len(busy) == 2, busy
    for reason in busy:
        assert_complete_or_busy(3, _incomplete([reason]))
        assert_decode_rate_or_busy(_incomplete([reason]))
    lying = RequestRecord(
        stream=0,
        index=0,
        scheduled_us=None,
        send_us=0,
        end_us=1,
        arrivals_us=[1, 2],
        usage_tokens=5,
        engine_tokens=None,
        finish_reason="length",
        done=True,
        error=None,
    )
    other = [
        disagreement_note([lying], 1),
        "the server answered as another model",
        "a level has fewer requests at once than asked",
    ]
    for reason in other:
        with pytest.raises(AssertionError):
            assert_complete_or_busy(3, _incomplete([reason]))
        with pytest.raises(AssertionError):
            assert_decode_rate_or_busy(_incomplete([reason]))
    with pytest.raises(AssertionError):  # one busy reason does not excuse another beside it
        assert_complete_or_busy(3, _incomplete([stall, other[0]]))
    with pytest.raises(AssertionError):  # only exit 3 says a result is incomplete
        assert_complete_or_busy(1, _incomplete([stall]))


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    """An inner pytest run with the project's rerun settings and nothing else."""
    settings = _settings()
    lines = ["[pytest]", "asyncio_default_fixture_loop_scope = function"]
    for key in RERUN_KEYS:
        value = settings[key]
        if isinstance(value, list):
            lines.append(f"{key} =")
            lines += [f"    {item}" for item in value]
        else:
            lines.append(f"{key} = {value}")
    pytester.makeini("\n".join(lines) + "\n")
    pytester.makepyfile(
        test_inner=f"""
        from pathlib import Path

        TRIES = Path({str(pytester.path)!r}) / "tries"

        def _try(name):
            count = len(TRIES.joinpath(name).read_text()) if TRIES.joinpath(name).exists() else 0
            TRIES.mkdir(exist_ok=True)
            TRIES.joinpath(name).write_text("x" * (count + 1))
            return count + 1

        def test_lagged_once():
            if _try("lagged_once") == 1:
                raise AssertionError("no figure: client event-loop lag p99 12.6 ms > 10 ms "
                                     "(LOOP_LAG_P99_LIMIT_S): the client could not keep up")

        def test_always_lagged():
            _try("always")
            raise AssertionError("the run is not valid: sends were late against the schedule: "
                                 "p99 16.8 ms > 10 ms (SEND_LAG_P99_LIMIT_S)")

        def test_wrong_number():
            _try("wrong")
            assert 2 == 3, "the throughput is not the truth's"
        """
    )
    return pytester


def test_a_lagged_run_passes_when_run_again_and_a_wrong_one_fails_at_once(
    inner: pytest.Pytester,
) -> None:
    result = inner.runpytest("-p", "no:cacheprovider", "-o", "reruns_delay=0")
    outcomes = result.parseoutcomes()
    assert (outcomes["passed"], outcomes["failed"], outcomes["rerun"]) == (1, 2, 3), outcomes
    tries = {path.name: len(path.read_text()) for path in (inner.path / "tries").iterdir()}
    # Run again once and passed; run again twice and still failed; never run again.
    assert tries == {"lagged_once": 2, "always": 3, "wrong": 1}


LAGGED = (
    "problem: client event-loop lag p99 31.6 ms > 10 ms (LOOP_LAG_P99_LIMIT_S): the client "
    "could not keep up; add --workers or cores\n" * 4  # longer than an assert's 240-char repr
)


def test_a_failed_exit_code_assert_names_the_client_rule_its_output_gave() -> None:
    """`assert done.returncode == 0` shows only a repr, cut at 240 characters: the commands'
    outcomes name the rules first, so the rerun rule sees them in the failure."""
    said = "incomplete: the run is not valid: client event-loop lag p99 31.6 ms > 10 ms (LOOP_LAG_P99_LIMIT_S)\n"
    done = Completed(["sagemeter", "load"], 3, LAGGED, said)
    with pytest.raises(AssertionError) as failed:
        assert done.returncode == 0
    assert "LOOP_LAG_P99_LIMIT_S" in str(failed.value)
    assert "incomplete: the run is not valid" in repr(done)  # its last line, cut at 160

    @click.command()
    def lagged() -> None:
        click.echo(LAGGED)
        raise SystemExit(3)

    app = typer.Typer()
    app.command()(lagged.callback)  # typer's own CliRunner and Result, as most tests use
    for result in (CliRunner().invoke(lagged), typer.testing.CliRunner().invoke(app)):
        with pytest.raises(AssertionError) as failed:
            assert result.exit_code == 0
        assert "LOOP_LAG_P99_LIMIT_S" in str(failed.value), type(result)
    quiet = Completed(["sagemeter"], 3, "no figure: the server refused\n", "")
    assert "LIMIT" not in repr(quiet) and "MAX" not in repr(quiet)
    # Lag and something else wrong: the failure must not be run again, so no rule is named.
    both = Completed(["sagemeter"], 3, LAGGED + "problem: 3 requests failed: HTTP 500\n", "")
    assert "LIMIT" not in repr(both), repr(both)
