"""llama.cpp's server (including the embedded engine): its native, non-OpenAI endpoints.

`/apply-template` renders the chat template and `/tokenize` (with `add_special`, as the server
does for a chat prompt) gives the prompt's ids. `/completion` takes a token-id prompt; with
`n_probs` its `completion_probabilities[0].top_logprobs` holds `{id, token, logprob}` for the
next token. Those logprobs are a softmax of the raw logits over the whole vocabulary (we never
send `post_sampling_probs`, which would switch to post-sampler `prob`s), so they do not depend on
temperature or penalties. The server has no prompt log-probabilities, so forcing costs one call
per answer token; with `cache_prompt` each call only evaluates the one new token (the previous
call left the shared prefix in the slot's KV cache), and the result equals what greedy decoding
saw at that step.
"""

from __future__ import annotations

import hashlib
from pathlib import PurePath
from typing import Any

from sagemeter.fidelity.adapter import (
    Answer,
    EngineInfo,
    clamp_logprob,
    ranked,
    request_json,
    shape_error,
)
from sagemeter.results.fidelity_record import Position, TopToken
from sagemeter.transport.client import HttpClient

# Greedy and unpenalised, stated explicitly: a server's defaults (repeat penalty, DRY) would
# otherwise change which token is taken.
GREEDY: dict[str, Any] = {
    "temperature": 0.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "cache_prompt": True,
}


class LlamaCppEngine:
    """Talks to `http://host:port` (no /v1) of a llama.cpp server."""

    def __init__(self, http: HttpClient) -> None:
        self.http = http

    async def describe(self) -> EngineInfo:
        props = await request_json(self.http, "GET", "/props")
        if not isinstance(props, dict):
            raise shape_error("/props", "properties")
        model = props.get("model_alias") or PurePath(str(props.get("model_path", "?"))).name
        template = props.get("chat_template")
        return EngineInfo(
            engine="llamacpp",
            version=f"llama.cpp {props['build_info']}" if props.get("build_info") else None,
            model=str(model),
            chat_template_sha256=(
                hashlib.sha256(template.encode()).hexdigest() if isinstance(template, str) else None
            ),
        )

    async def prompt_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        rendered = await request_json(self.http, "POST", "/apply-template", {"messages": messages})
        if not isinstance(rendered, dict) or not isinstance(rendered.get("prompt"), str):
            raise shape_error("/apply-template", "prompt")
        tokens = await request_json(
            self.http, "POST", "/tokenize", {"content": rendered["prompt"], "add_special": True}
        )
        ids = tokens.get("tokens") if isinstance(tokens, dict) else None
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            raise shape_error("/tokenize", "token ids")
        return ids

    async def generate(self, prompt_ids: list[int], max_tokens: int) -> Answer:
        body = {**GREEDY, "prompt": prompt_ids, "n_predict": max_tokens, "return_tokens": True}
        reply = await request_json(self.http, "POST", "/completion", body)
        ids = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise shape_error("/completion", "tokens")
        finish = "eos" if reply.get("stop_type") == "eos" else "length"
        return Answer(token_ids=ids, finish=finish)

    async def score(
        self, prompt_ids: list[int], answer_ids: list[int], top_k: int
    ) -> list[Position]:
        positions = []
        for index, token_id in enumerate(answer_ids):
            body = {
                **GREEDY,
                "prompt": prompt_ids + answer_ids[:index],
                "n_predict": 1,
                "n_probs": top_k,
                # The first step evaluates the whole prompt afresh, whatever the slot held
                # before: a prefix half-reused from an earlier request is summed in a different
                # order (an F32 reference differed from itself by KL up to 1e-5 that way).
                "cache_prompt": index > 0,
            }
            reply = await request_json(self.http, "POST", "/completion", body)
            top = _top_logprobs(reply)
            ranked_top = ranked(top, top_k)
            text = next((token.text for token in top if token.id == token_id), None)
            if text is None:
                text = await self.detokenize([token_id])
            positions.append(Position(token_id=token_id, token_text=text, top=ranked_top))
        return positions

    async def detokenize(self, ids: list[int]) -> str:
        reply = await request_json(self.http, "POST", "/detokenize", {"tokens": ids})
        if not isinstance(reply, dict) or not isinstance(reply.get("content"), str):
            raise shape_error("/detokenize", "content")
        return str(reply["content"])


def _top_logprobs(reply: Any) -> list[TopToken]:
    try:
        entries = reply["completion_probabilities"][0]["top_logprobs"]
        top = [
            TopToken(int(e["id"]), str(e["token"]), clamp_logprob(e["logprob"])) for e in entries
        ]
    except (KeyError, IndexError, TypeError, ValueError):
        raise shape_error("/completion", "completion_probabilities[0].top_logprobs") from None
    if not top:
        raise shape_error("/completion", "top_logprobs entries")
    return top
