"""The vLLM path against a loopback server that speaks vLLM's wire format for a toy model.

The fake answers `/v1/models`, `/version`, `/tokenize` (chat messages) and `/v1/completions`
(token-id prompts; greedy generation, or `prompt_logprobs` in vLLM's shape: a list with a null
first entry, then per prompt token a map from token id string to `{logprob, rank,
decoded_token}` holding the top k plus the actual token when it ranks lower). Its toy model is a
fixed function of the prefix, so the test can say what every distribution must be.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sagemeter.cli.fidelity import register
from sagemeter.errors import UserError
from sagemeter.fidelity.collect import collect_fidelity
from sagemeter.fidelity.compare import compare_fidelity
from sagemeter.fidelity.records import load_record
from sagemeter.questions import load_question_set
from sagemeter.transport.retry import RetryPolicy
from tests.wire import Handler, WireServer, json_response

VOCAB = 24
EOS = 0
MODEL = "toy/model-7b"


def token_text(token: int) -> str:
    return "<eos>" if token == EOS else f" w{token}"


def toy_logprobs(prefix: list[int], wobble: float = 0.0) -> list[float]:
    """Log-softmax of a fixed function of the prefix (`wobble` makes a slightly different model)."""
    last, n = prefix[-1], len(prefix)
    logits = [
        3.0 * math.sin(1.7 * t + 0.9 * last + 0.37 * n) + wobble * math.cos(2.3 * t + n)
        for t in range(VOCAB)
    ]
    logits[EOS] -= 2.0  # rarely stop, so answers run to max_tokens
    top = max(logits)
    total = math.log(sum(math.exp(x - top) for x in logits)) + top
    return [x - total for x in logits]


def ranked_ids(logprobs: list[float]) -> list[int]:
    return sorted(range(VOCAB), key=lambda t: (-logprobs[t], t))


def chat_tokens(messages: list[dict[str, str]]) -> list[int]:
    text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
    return [1 + (ord(ch) % (VOCAB - 1)) for ch in text]


class FakeVllm:
    """Routes for one toy model; `old` drops `token_ids` (vLLM before `return_token_ids`)."""

    def __init__(self, wobble: float = 0.0, *, old: bool = False, owner: str = "vllm") -> None:
        self.wobble, self.old, self.owner = wobble, old, owner

    def routes(self) -> dict[str, Handler]:
        return {
            "/v1/models": self.respond(
                lambda _: {
                    "object": "list",
                    "data": [
                        {
                            "id": MODEL,
                            "object": "model",
                            "owned_by": self.owner,
                            "root": MODEL,
                            "max_model_len": 4096,
                        }
                    ],
                }
            ),
            "/version": self.respond(lambda _: {"version": "0.11.0"}),
            "/tokenize": self.respond(self.tokenize),
            "/v1/completions": self.respond(self.completions),
        }

    @staticmethod
    def respond(make: Callable[[dict[str, Any]], Any]) -> Handler:
        async def handler(writer: asyncio.StreamWriter, body: dict[str, object]) -> None:
            payload = make(dict(body))
            status = 400 if isinstance(payload, dict) and "error" in payload else 200
            writer.write(json_response(status, payload))

        return handler

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        tokens = chat_tokens(body["messages"])
        return {"count": len(tokens), "max_model_len": 4096, "tokens": tokens, "token_strs": None}

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt: list[int] = body["prompt"]
        k = body.get("prompt_logprobs")
        if k is not None and k > 20:
            return {
                "error": {
                    "message": f"Requested prompt logprobs of {k}, which is greater than max allowed: 20",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            }
        answer: list[int] = []
        for _ in range(body.get("max_tokens", 16)):
            answer.append(ranked_ids(toy_logprobs(prompt + answer, self.wobble))[0])
            if answer[-1] == EOS:
                break
        choice: dict[str, Any] = {
            "index": 0,
            "text": "".join(token_text(t) for t in answer if t != EOS),
            "logprobs": None,
            "finish_reason": "stop" if answer[-1] == EOS else "length",
            "stop_reason": None,
            "prompt_logprobs": None if k is None else self.prompt_logprobs(prompt, k),
        }
        if body.get("logprobs") is not None:
            as_ids = body.get("return_tokens_as_token_ids")
            choice["logprobs"] = {
                "text_offset": list(range(len(answer))),
                "token_logprobs": [-0.1] * len(answer),
                "tokens": [f"token_id:{t}" if as_ids else token_text(t) for t in answer],
                "top_logprobs": [
                    {f"token_id:{t}" if as_ids else token_text(t): -0.1} for t in answer
                ],
            }
        if body.get("return_token_ids") and not self.old:
            choice["token_ids"] = answer
            choice["prompt_token_ids"] = prompt
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": MODEL,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(answer),
                "total_tokens": len(prompt) + len(answer),
            },
        }

    def prompt_logprobs(self, prompt: list[int], k: int) -> list[dict[str, Any] | None]:
        entries: list[dict[str, Any] | None] = [None]
        for j in range(1, len(prompt)):
            logprobs = toy_logprobs(prompt[:j], self.wobble)
            order = ranked_ids(logprobs)
            actual = prompt[j]
            chosen = {actual: order.index(actual) + 1}  # vLLM puts the actual token first
            chosen.update({t: order.index(t) + 1 for t in order[:k]})
            entries.append(
                {
                    str(t): {"logprob": logprobs[t], "rank": rank, "decoded_token": token_text(t)}
                    for t, rank in chosen.items()
                }
            )
        return entries


def expected_top(prefix: list[int], k: int, wobble: float = 0.0) -> list[tuple[int, str, object]]:
    logprobs = toy_logprobs(prefix, wobble)
    return [
        (t, token_text(t), pytest.approx(logprobs[t], abs=1e-9)) for t in ranked_ids(logprobs)[:k]
    ]


PROMPTS = ["What is 2 + 2?", "Name a colour.", "Capital of Peru?"]


async def test_reference_round_trip_matches_the_toy_model_and_vllm_request_shapes() -> None:
    with WireServer(FakeVllm().routes()) as server:
        a = await collect_fidelity(
            server.url, PROMPTS, top_k=4, max_tokens=6, system_prompt="Be brief."
        )
    assert (a.engine, a.model, a.engine_version, a.forced) == ("vllm", MODEL, "vLLM 0.11.0", False)
    assert a.base_url == server.url.removesuffix("/v1")
    for item, prompt in zip(a.prompts, PROMPTS, strict=True):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]
        assert item.prompt_token_ids == chat_tokens(messages)
        assert len(item.positions) == 6 and item.finish == "length"
        for i, position in enumerate(item.positions):
            prefix = item.prompt_token_ids + item.answer_token_ids[:i]
            assert [tuple(t) for t in position.top] == expected_top(prefix, 4)
            assert position.token_id == position.top[0].id  # greedy: the answer is the top token
            assert position.token_text == token_text(position.token_id)
    tokenize = [r for r in server.requests if r["path"] == "/tokenize"]
    assert tokenize[0]["model"] == MODEL and tokenize[0]["add_generation_prompt"] is True
    completions = [r for r in server.requests if r["path"] == "/v1/completions"]
    generate, score = completions[0], completions[1]
    assert generate["temperature"] == 0 and generate["repetition_penalty"] == 1.0
    assert generate["max_tokens"] == 6 and generate["prompt"] == a.prompts[0].prompt_token_ids
    assert score["prompt"] == a.prompts[0].prompt_token_ids + a.prompts[0].answer_token_ids
    assert (score["max_tokens"], score["prompt_logprobs"], score["model"]) == (1, 4, MODEL)
    assert "stream" not in score  # vLLM refuses prompt_logprobs on a stream


async def test_same_server_twice_agrees_fully_and_a_wobbled_model_does_not() -> None:
    with WireServer(FakeVllm().routes()) as server:
        a = await collect_fidelity(server.url, PROMPTS, top_k=4, max_tokens=6)
        again = await collect_fidelity(server.url, [], top_k=4, reference=a)
    with WireServer(FakeVllm(wobble=1.5).routes()) as other:
        b = await collect_fidelity(other.url, [], top_k=4, reference=a)
    assert again.forced and again.reference_model == MODEL
    floor = compare_fidelity(a, again)
    assert floor.agreement.share == 1.0 and floor.kl_max == pytest.approx(0.0, abs=1e-12)
    # B was forced along A's tokens: each of its positions is B's distribution after A's prefix.
    agree = total = 0
    for pa, pb in zip(a.prompts, b.prompts, strict=True):
        assert pb.answer_token_ids == pa.answer_token_ids and pb.template_agrees
        for i, position in enumerate(pb.positions):
            prefix = pa.prompt_token_ids + pa.answer_token_ids[:i]
            assert [tuple(t) for t in position.top] == expected_top(prefix, 4, wobble=1.5)
            agree += position.top[0].id == pa.positions[i].top[0].id
            total += 1
    c = compare_fidelity(a, b, floor=again)
    assert (c.agreement.count, c.agreement.total) == (agree, total)
    assert agree < total and c.kl_mean > 0.01
    assert c.floor is not None and c.floor.agreement.share == 1.0


UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"retry-after: 0\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
)


def failing_first(routes: dict[str, Handler], path: str) -> dict[str, Handler]:
    """`path` answers 503 (Retry-After: 0) to every odd call: each request's first try fails."""
    answer, calls = routes[path], itertools.count(1)

    async def flaky(writer: asyncio.StreamWriter, body: dict[str, object]) -> None:
        if next(calls) % 2:
            writer.write(UNAVAILABLE)
        else:
            await answer(writer, body)

    return {**routes, path: flaky}


async def test_a_transient_failure_is_sent_again_and_counted() -> None:
    with WireServer(FakeVllm().routes()) as clean:
        truth = await collect_fidelity(clean.url, PROMPTS[:2], top_k=3, max_tokens=4)
    with (
        WireServer(failing_first(FakeVllm().routes(), "/v1/completions")) as flaky,
        pytest.raises(UserError, match="answered HTTP 503"),
    ):
        await collect_fidelity(flaky.url, PROMPTS[:2], top_k=3, max_tokens=4)
    with WireServer(failing_first(FakeVllm().routes(), "/v1/completions")) as flaky:
        record = await collect_fidelity(
            flaky.url, PROMPTS[:2], top_k=3, max_tokens=4, retry=RetryPolicy(retries=1)
        )
    assert [p.positions for p in record.prompts] == [p.positions for p in truth.prompts]
    assert truth.retries == 0
    assert record.retries == 4  # two prompts, each a greedy answer and a scoring, each once


async def test_older_vllm_without_token_ids_gives_the_same_record() -> None:
    with WireServer(FakeVllm().routes()) as new, WireServer(FakeVllm(old=True).routes()) as old:
        a = await collect_fidelity(new.url, PROMPTS[:2], top_k=3, max_tokens=5)
        b = await collect_fidelity(old.url, PROMPTS[:2], top_k=3, max_tokens=5)
    assert [p.positions for p in a.prompts] == [p.positions for p in b.prompts]


async def test_detection_and_refusals() -> None:
    with WireServer(FakeVllm(owner="sglang").routes()) as server:
        with pytest.raises(
            UserError, match="is SGLang, which token-level fidelity does not support"
        ):
            await collect_fidelity(server.url, PROMPTS)
        # An explicit engine overrides what the server says about itself.
        forced = await collect_fidelity(server.url, PROMPTS[:1], engine="vllm", max_tokens=2)
        assert forced.engine == "vllm"
    with WireServer(FakeVllm(owner="someone").routes()) as server:
        with pytest.raises(UserError, match=r"cannot tell which engine.*engine='vllm'"):
            await collect_fidelity(server.url, PROMPTS)
        with pytest.raises(UserError, match="engine 'sglang' is not supported"):
            await collect_fidelity(server.url, PROMPTS, engine="sglang")
    with WireServer(FakeVllm().routes()) as server:
        with pytest.raises(UserError, match="top_k must be between 1 and 20"):
            await collect_fidelity(server.url, PROMPTS, top_k=21)
        a = await collect_fidelity(server.url, PROMPTS[:1], top_k=2, max_tokens=2)
        with pytest.raises(UserError, match="exceeds the reference's top_k 2"):
            await collect_fidelity(server.url, [], top_k=3, reference=a)
        with pytest.raises(UserError, match="prompts differ from the reference's"):
            await collect_fidelity(server.url, ["other"], top_k=2, reference=a)


async def test_unreachable_server_is_one_line() -> None:
    with pytest.raises(UserError, match="cannot reach the server"):
        await collect_fidelity("http://127.0.0.1:1/v1", PROMPTS)


async def test_server_that_ignores_prompt_logprobs_is_refused() -> None:
    fake = FakeVllm()
    routes = fake.routes()

    async def ignores(writer: asyncio.StreamWriter, body: dict[str, object]) -> None:
        payload = fake.completions({**body, "prompt_logprobs": None})
        writer.write(json_response(200, payload))

    routes["/v1/completions"] = ignores
    with WireServer(routes) as server, pytest.raises(UserError, match="the server ignored them"):
        await collect_fidelity(server.url, PROMPTS[:1], max_tokens=2)


async def test_server_error_becomes_one_line() -> None:
    fake = FakeVllm()
    routes = fake.routes()

    async def refuses(writer: asyncio.StreamWriter, body: dict[str, object]) -> None:
        writer.write(json_response(500, {"error": {"message": "engine dead", "code": 500}}))

    routes["/v1/completions"] = refuses
    with WireServer(routes) as server, pytest.raises(UserError, match="HTTP 500: engine dead"):
        await collect_fidelity(server.url, PROMPTS[:1], max_tokens=2)


def test_cli_collect_force_and_compare(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    with (
        WireServer(FakeVllm().routes()) as a_server,
        WireServer(FakeVllm(wobble=1.5).routes()) as b_server,
    ):
        a_path, b_path, again_path = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "a2.json"
        done = runner.invoke(
            app,
            ["fidelity", "collect", str(a_path), a_server.url, "--limit", "3", "--max-tokens", "4"],
        )
        assert done.exit_code == 0, done.output
        assert "3 prompts, 12 positions (vllm)" in done.output
        for out, url in ((b_path, b_server.url), (again_path, a_server.url)):
            done = runner.invoke(
                app, ["fidelity", "collect", str(out), url, "--reference", str(a_path)]
            )
            assert done.exit_code == 0, done.output
    article = [q.prompt for q in load_question_set("article-40").questions]
    assert [p.prompt for p in load_record(a_path).prompts] == article[:3]
    assert load_record(b_path).forced and load_record(b_path).model == MODEL
    done = runner.invoke(
        app,
        [
            "fidelity",
            "compare",
            str(a_path),
            str(b_path),
            "--floor",
            str(again_path),
            "--out",
            str(tmp_path / "c.json"),
        ],
    )
    assert done.exit_code == 0, done.output
    assert "B vs A: top-token agreement" in done.output
    assert "A' vs A (noise floor): top-token agreement 100.0% (12/12" in done.output
    saved = json.loads((tmp_path / "c.json").read_text())
    assert saved["positions"] == 12 and saved["floor"]["agreement"]["count"] == 12
    refused = runner.invoke(
        app, ["fidelity", "collect", str(tmp_path / "x.json"), "gemma@us-east-2"]
    )
    assert isinstance(refused.exception, UserError) and "SageMaker" in str(refused.exception)
