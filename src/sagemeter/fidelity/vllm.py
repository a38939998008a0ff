"""vLLM's OpenAI server: `/tokenize` for the chat prompt, `prompt_logprobs` for forced scoring.

Forcing is one call per prompt: `/v1/completions` with the token-id prompt `prompt + answer`,
`max_tokens: 1` and `prompt_logprobs: k` returns, in `choices[0].prompt_logprobs`, one entry per
prompt token (the first is null): a map from token id (a JSON string) to
`{logprob, rank, decoded_token}` holding the k most likely tokens plus the actual token when it
ranks below k. vLLM computes them from the raw logits (before temperature or penalties), over the
whole vocabulary. `k` is capped by the server's `--max-logprobs` (20 unless set).
"""

from __future__ import annotations

from typing import Any

from sagemeter.errors import UserError
from sagemeter.fidelity.adapter import (
    Answer,
    EngineInfo,
    clamp_logprob,
    ranked,
    request_json,
    shape_error,
)
from sagemeter.results.fidelity_record import Position, TopToken
from sagemeter.transport.client import HttpClient, TransportError
from sagemeter.transport.models_list import first_model

# Greedy and unpenalised, stated explicitly: vLLM applies the model's generation_config.json
# defaults (often a repetition penalty) to any field a request leaves out.
GREEDY: dict[str, Any] = {
    "temperature": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


class VllmEngine:
    """Talks to `http://host:port` (no /v1) of a vLLM OpenAI-compatible server."""

    def __init__(self, http: HttpClient) -> None:
        self.http = http
        self._model: str | None = None

    async def model(self) -> str:
        if self._model is None:
            listing = await request_json(self.http, "GET", "/v1/models")

            first = first_model(listing)
            if first is None:
                raise shape_error("/v1/models", "model id")
            self._model = str(first["id"])
        return self._model

    async def describe(self) -> EngineInfo:
        model = await self.model()
        version = None
        try:
            reply = await self.http.call_json("GET", "/version")
            if reply.status == 200 and isinstance(reply.payload, dict):
                version = f"vLLM {reply.payload.get('version')}"
        except TransportError:
            version = None  # the version is a nicety; the record says None
        return EngineInfo(engine="vllm", version=version, model=model, chat_template_sha256=None)

    async def prompt_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        body = {"model": await self.model(), "messages": messages, "add_generation_prompt": True}
        reply = await request_json(self.http, "POST", "/tokenize", body)
        ids = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            raise shape_error("/tokenize", "tokens")
        return ids

    async def generate(self, prompt_ids: list[int], max_tokens: int) -> Answer:
        body = {
            **GREEDY,
            "model": await self.model(),
            "prompt": prompt_ids,
            "max_tokens": max_tokens,
            # Token ids of the answer: `return_token_ids` (newer vLLM) gives them directly;
            # `logprobs` with `return_tokens_as_token_ids` spells them `token_id:N` (older vLLM).
            "return_token_ids": True,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
        }
        reply = await request_json(self.http, "POST", "/v1/completions", body)
        try:
            choice = reply["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise shape_error("/v1/completions", "choices") from None
        ids = choice.get("token_ids")
        if not isinstance(ids, list):
            ids = _ids_from_logprobs(choice.get("logprobs"))
        finish = "length" if choice.get("finish_reason") == "length" else "eos"
        return Answer(token_ids=[int(i) for i in ids], finish=finish)

    async def score(
        self, prompt_ids: list[int], answer_ids: list[int], top_k: int
    ) -> list[Position]:
        if not answer_ids:
            return []
        body = {
            **GREEDY,
            "model": await self.model(),
            "prompt": prompt_ids + answer_ids,
            "max_tokens": 1,
            "prompt_logprobs": top_k,
        }
        reply = await request_json(self.http, "POST", "/v1/completions", body)
        try:
            entries = reply["choices"][0]["prompt_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise shape_error("/v1/completions", "choices[0].prompt_logprobs") from None
        if not isinstance(entries, list):
            raise shape_error("/v1/completions", "prompt_logprobs (the server ignored them)")
        if len(entries) != len(prompt_ids) + len(answer_ids):
            raise UserError(
                f"/v1/completions: {len(entries)} prompt_logprobs entries for "
                f"{len(prompt_ids) + len(answer_ids)} prompt tokens"
            )
        start = len(prompt_ids)
        return [
            _position(entries[start + index], token_id, top_k)
            for index, token_id in enumerate(answer_ids)
        ]


def _position(entry: Any, token_id: int, top_k: int) -> Position:
    if not isinstance(entry, dict) or not entry:
        raise shape_error("/v1/completions", "prompt_logprobs entry for an answer token")
    candidates: list[tuple[int | None, TopToken]] = []
    for key, value in entry.items():
        if not isinstance(value, dict):
            raise shape_error("/v1/completions", "{logprob, rank, decoded_token} entries")
        token = TopToken(
            int(key), str(value.get("decoded_token") or ""), clamp_logprob(value.get("logprob"))
        )
        rank = value.get("rank")
        candidates.append((rank if isinstance(rank, int) else None, token))
    # The entry is the top k plus the actual token when it ranks lower; use vLLM's ranks
    # (1 = most likely) to drop that extra one, and the logprobs where no rank is given.
    in_top = [token for rank, token in candidates if rank is None or rank <= top_k]
    actual = next((token for _, token in candidates if token.id == token_id), None)
    return Position(
        token_id=token_id,
        token_text=actual.text if actual is not None else "",
        top=ranked(in_top, top_k),
    )


def _ids_from_logprobs(logprobs: Any) -> list[int]:
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    if not isinstance(tokens, list):
        raise shape_error("/v1/completions", "token_ids or logprobs.tokens")
    ids = []
    for token in tokens:
        text = str(token)
        if not text.startswith("token_id:"):
            raise shape_error("/v1/completions", "tokens spelled token_id:N")
        ids.append(int(text.removeprefix("token_id:")))
    return ids
