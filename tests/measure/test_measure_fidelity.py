"""Token-level fidelity inside `measure` and `combine`: A records, A' is forced along A."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sagemeter.compare import combine
from sagemeter.measure.workflow import fidelity_reference, measure_target
from sagemeter.settings import quick_settings
from sagemeter.targets import parse_target
from tests import cli_run

pytestmark = pytest.mark.slow


def test_a_again_forced_along_a_agrees_everywhere(engine_url: str, tmp_path: Path) -> None:
    fidelity = {"fidelity_prompts": 2, "fidelity_max_tokens": 4}
    # Fidelity is what is checked: 16-token long replies, one load level and three 8-token
    # questions around it.
    smaller = {"long_tokens": 16, "load_levels": [1], "questions_per_family": 1}
    smaller |= {"quality_max_tokens": 8}
    settings = quick_settings().model_copy(update=fidelity | smaller)
    target = parse_target(engine_url)
    first, first_path = asyncio.run(
        measure_target(target, name="a", settings=settings, out_dir=tmp_path)
    )
    assert first.detail is not None and first.detail.fidelity is not None
    record = first.detail.fidelity
    assert not record.forced and len(record.prompts) == 2
    assert all(1 <= len(prompt.positions) <= 4 for prompt in record.prompts)

    reference = fidelity_reference(first_path)  # read back from the result file
    again, again_path = asyncio.run(
        measure_target(
            target,
            name="a-again",
            settings=settings,
            out_dir=tmp_path,
            fidelity_reference=reference,
        )
    )
    assert again.detail is not None and again.detail.fidelity is not None
    assert again.detail.fidelity.forced

    (check,) = combine([first_path, again_path]).fidelity_checks
    agreement = check.comparison.agreement
    assert agreement.count == agreement.total == sum(len(p.positions) for p in record.prompts)
    assert check.comparison.kl_max < 1e-6
    assert check.summary and "fidelity" in check.summary[0]


def test_a_result_without_a_record_is_refused_in_one_line(engine_url: str, tmp_path: Path) -> None:
    plain = tmp_path / "measure-plain.json"
    plain.write_text('{"decode_tokens_per_second": 5.0}')
    command = ["measure", str(tmp_path), engine_url]
    done = cli_run.invoke([*command, "--quick", "--fidelity-reference", str(plain)])
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "holds no fidelity record" in done.stderr
    assert not list(tmp_path.glob("measure-1*.json"))
