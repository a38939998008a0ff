"""`new_session`: botocore's service models are read once per process and data path, while each
session keeps its own credentials and profile (real boto3; the file reads are counted where
botocore reads its JSON)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.loaders import JSONFileLoader

from sagemeter.transport.aws_session import new_session, service_model


@pytest.fixture
def file_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every model file botocore parses from here on, by path."""
    reads: list[str] = []
    original = JSONFileLoader.load_file

    def counted(self: JSONFileLoader, file_path: str) -> Any:
        reads.append(file_path)
        return original(self, file_path)

    monkeypatch.setattr(JSONFileLoader, "load_file", counted)
    yield reads


def _sagemaker_client(session: Any = None) -> Any:
    return (session or new_session()).client("sagemaker", region_name="us-east-2")


def test_a_second_session_reads_no_model_file_and_keeps_its_own_credentials(
    file_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first-secret")
    first = new_session()
    _sagemaker_client(first)
    file_reads.clear()  # the first client may read (or may find an earlier test's parse)

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "second-key")
    second = new_session()
    client = _sagemaker_client(second)

    assert file_reads == []
    assert client.meta.service_model.operation_model("CreateEndpoint").name == "CreateEndpoint"
    assert first.get_credentials().access_key == "first-key"
    assert second.get_credentials().access_key == "second-key"


def test_another_data_path_reads_its_own_models(
    file_reads: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    _sagemaker_client()
    file_reads.clear()

    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))  # a user's extra models folder
    _sagemaker_client()

    assert any("/sagemaker/" in path for path in file_reads), file_reads


def test_a_profile_is_the_sessions_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("[profile east]\nregion = us-east-1\n[profile west]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)

    assert new_session("east").region_name == "us-east-1"
    assert new_session("west").region_name == "us-west-2"


def test_the_service_model_comes_from_the_same_parse(
    file_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    _sagemaker_client()
    file_reads.clear()

    model = service_model("sagemaker")

    assert file_reads == []
    assert "ml.g6e.xlarge" in model.shape_for("ProductionVariantInstanceType").enum  # type: ignore[attr-defined]
