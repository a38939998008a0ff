"""What an engine must offer for token-level fidelity, and the one way we call its HTTP API.

Each engine speaks its own dialect (llama.cpp's native `/completion`, vLLM's `prompt_logprobs`);
`collect` only sees this protocol, so adding an engine is one new module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from sagemeter.errors import UserError
from sagemeter.results.fidelity_record import Engine, Position, TopToken
from sagemeter.transport.client import HttpClient, JsonReply, TransportError
from sagemeter.transport.upstream import one_line

# The vLLM JSON encoder turns -inf into -9999.0; we do the same so every record is plain JSON.
LOGPROB_FLOOR = -9999.0


@dataclass(frozen=True)
class EngineInfo:
    """What the server says about itself."""

    engine: Engine
    version: str | None
    model: str
    chat_template_sha256: str | None


@dataclass(frozen=True)
class Answer:
    """A greedy answer: its token ids and why it ended (`eos` or `length`)."""

    token_ids: list[int]
    finish: str


class FidelityEngine(Protocol):
    """One server's way to tokenize a chat prompt, answer greedily, and score forced tokens."""

    async def describe(self) -> EngineInfo: ...

    async def prompt_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        """The token ids the server's own chat template makes of `messages`."""
        ...

    async def generate(self, prompt_ids: list[int], max_tokens: int) -> Answer:
        """The greedy answer (temperature 0, no penalties) to an already-tokenized prompt."""
        ...

    async def score(
        self, prompt_ids: list[int], answer_ids: list[int], top_k: int
    ) -> list[Position]:
        """Position i: the top-k next tokens after prompt + answer_ids[:i], one per answer token."""
        ...


def clamp_logprob(value: object) -> float:
    """A server's logprob as a finite float (null, -inf and NaN become the floor)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return LOGPROB_FLOOR
    number = float(value)
    if math.isnan(number) or number < LOGPROB_FLOOR:
        return LOGPROB_FLOOR
    return min(number, 0.0)


def ranked(candidates: list[TopToken], top_k: int) -> list[TopToken]:
    """The `top_k` most likely candidates, most likely first (ties by id, so files are stable)."""
    return sorted(candidates, key=lambda token: (-token.logprob, token.id))[:top_k]


async def request_json(
    http: HttpClient, method: str, path: str, body: dict[str, Any] | None = None
) -> Any:
    """Call the server and return its JSON; any failure becomes one UserError line.

    A transient failure (429, 5xx, a dropped connection) is sent again under the client's own
    retry policy: every call here is deterministic (greedy, or scoring), so a second try is the
    same question, and one hiccup must not lose a whole fidelity record.
    """
    where = f"{http.address.base_url}{path}"
    try:
        reply = await http.call_json(method, path, body, timeout_s=http.timeout_s, retry=http.retry)
    except TransportError as exc:
        raise UserError(f"{where}: {exc}") from None
    if reply.status != 200:
        raise UserError(f"{where} answered HTTP {reply.status}: {error_text(reply)}")
    if reply.payload is None:
        raise UserError(f"{where} answered something that is not JSON")
    return reply.payload


def error_text(reply: JsonReply) -> str:
    """The server's own error message, short, whatever shape its error body has."""
    return one_line(reply.text) or "(empty body)"


def shape_error(path: str, what: str) -> UserError:
    """A response that lacks what the engine's dialect promises: usually the wrong engine."""
    return UserError(
        f"{path}: the answer has no {what}; is this the engine it was taken for? "
        "(pass engine='llamacpp' or 'vllm' to say which)"
    )
