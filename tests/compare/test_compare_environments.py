"""`combine` says when the compared results ran on different hardware or server software: the
article's own files and the tests' fixed run, edited the way a mixed-up run would write them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sagemeter.compare import combine
from tests.conftest import reference_file

FIXED_RUN = Path(__file__).parents[1] / "data" / "report-run"
LOCAL = ("measure-smollm2-f32.json", "measure-smollm2-q4_1.json", "measure-smollm2-f32-again.json")
ARTICLE = (
    "run/measure-gemma-4-e2b.json",
    "run/measure-gemma-4-e2b-qat.json",
    "run/measure-gemma-4-e2b-again.json",
)
DIGEST = "763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm@sha256:" + "ab" * 32


def _differences(warnings: list[str]) -> list[str]:
    return [warning for warning in warnings if " differs: " in warning]


def _copy(source: Path, target: Path, edit: Any = None) -> Path:
    data = json.loads(source.read_text())
    if edit is not None:
        edit(data)
    target.write_text(json.dumps(data))
    return target


def test_the_articles_arms_ran_alike_and_say_nothing() -> None:
    comparison = combine([reference_file(name) for name in ARTICLE])
    assert _differences(comparison.warnings) == []


def test_a_different_placed_type_and_image_digest_are_named_with_their_files(
    tmp_path: Path,
) -> None:
    def elsewhere(data: dict[str, Any]) -> None:
        data["endpoint"]["instance_types"] = ["ml.g6.2xlarge"]
        data["endpoint"]["image_digest"] = DIGEST

    bf16, qat, again = (reference_file(name) for name in ARTICLE)
    moved = _copy(qat, tmp_path / "measure-gemma-4-e2b-qat.json", elsewhere)
    comparison = combine([bf16, moved, again])
    placed, image = _differences(comparison.warnings)
    assert placed == (
        "placed instance type differs: measure-gemma-4-e2b.json ml.g6.xlarge, "
        "measure-gemma-4-e2b-qat.json ml.g6.2xlarge, measure-gemma-4-e2b-again.json "
        "ml.g6.xlarge; a speed ratio between them is partly the hardware's, not the checkpoints'"
    )
    assert image.startswith("image digest differs: measure-gemma-4-e2b.json ")
    assert f"measure-gemma-4-e2b-qat.json {DIGEST}," in image
    assert image.endswith("partly the server software's, not the checkpoints'")


def test_a_fact_only_one_file_records_is_named_as_not_recorded(tmp_path: Path) -> None:
    def unplaced(data: dict[str, Any]) -> None:
        del data["endpoint"]["instance_types"]

    bf16, qat, _ = (reference_file(name) for name in ARTICLE)
    comparison = combine([bf16, _copy(qat, tmp_path / "measure-qat.json", unplaced)])
    assert _differences(comparison.warnings) == [
        "placed instance type differs: measure-gemma-4-e2b.json ml.g6.xlarge, measure-qat.json "
        "not recorded; a speed ratio between them is partly the hardware's, not the checkpoints'"
    ]


def test_files_that_record_no_environment_say_nothing() -> None:
    """The article's figures as minimal files: nothing recorded on either side, nothing said."""
    bf16, qat = (
        reference_file("measure-gemma-4-e2b.json"),
        reference_file("measure-gemma-4-e2b-qat.json"),
    )
    assert _differences(combine([bf16, qat]).warnings) == []


def test_the_fixed_local_run_is_alike_until_one_arm_moves_host_and_engine(tmp_path: Path) -> None:
    a, b, a_again = (FIXED_RUN / name for name in LOCAL)
    assert _differences(combine([a, b, a_again]).warnings) == []

    def other_machine(data: dict[str, Any]) -> None:
        environment = data["detail"]["environment"]
        environment["host_cpu"] = "Intel Xeon"
        environment["host_cores"] = 8
        environment["engine_version"] = "xllamacpp 2026.11.1"

    moved = _copy(a_again, tmp_path / "measure-smollm2-f32-again.json", other_machine)
    warnings = _differences(combine([a, b, moved]).warnings)
    assert [warning.split(" differs: ")[0] for warning in warnings] == [
        "engine version",
        "host CPU",
        "host core count",
    ]
    assert warnings[1] == (
        "host CPU differs: measure-smollm2-f32.json AMD EPYC, measure-smollm2-q4_1.json AMD EPYC, "
        "measure-smollm2-f32-again.json Intel Xeon; a speed ratio between them is partly the "
        "hardware's, not the checkpoints'"
    )
    assert "measure-smollm2-f32-again.json xllamacpp 2026.11.1;" in warnings[0]


def test_the_host_of_a_remote_server_is_not_compared(tmp_path: Path) -> None:
    """For a URL target the host is the client's, not the server's: it differing says nothing."""

    def remote(cpu: str) -> Any:
        def edit(data: dict[str, Any]) -> None:
            data["detail"]["environment"] |= {"backend": "openai-http", "host_cpu": cpu}

        return edit

    a, b, _ = (FIXED_RUN / name for name in LOCAL)
    first = _copy(a, tmp_path / "measure-a.json", remote("AMD EPYC"))
    second = _copy(b, tmp_path / "measure-b.json", remote("Apple M3"))
    assert _differences(combine([first, second]).warnings) == []
