"""The fidelity record's models, with the result schema (a result keeps one); reading and
writing record files is `sagemeter.fidelity.records`'s.

A record made without a reference holds the endpoint's own greedy answers; a record made with a
reference holds the same endpoint's distributions forced along the reference's answer tokens, so
two records line up position by position. Top-k entries are stored as `[id, text, logprob]`
triples to keep the file small.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "sagemeter.fidelity/1"
Engine = Literal["llamacpp", "vllm"]


class TopToken(NamedTuple):
    """One candidate next token and its log-probability over the full vocabulary."""

    id: int
    text: str
    logprob: float


class Position(BaseModel):
    """One step of the answer: the token taken there, and the distribution that preceded it."""

    token_id: int
    token_text: str
    top: list[TopToken] = Field(description="top-k candidates, most likely first")


class PromptRecord(BaseModel):
    """One prompt: the token ids the answer was conditioned on, and one Position per answer token.

    `template_agrees` is False when this endpoint's own chat template tokenized the prompt
    differently from the reference (the reference's tokens were used regardless).
    """

    prompt: str
    prompt_token_ids: list[int]
    template_agrees: bool = True
    finish: str = Field(description="why the answer ended: eos or length (the reference's)")
    positions: list[Position]

    @property
    def answer_token_ids(self) -> list[int]:
        return [position.token_id for position in self.positions]

    @property
    def answer_text(self) -> str:
        return "".join(position.token_text for position in self.positions)


class Vocabulary(BaseModel):
    """The tokenizer's own id → token map as a fingerprint (see fidelity/vocabulary.py)."""

    size: int
    sha256: str = Field(description="SHA-256 of the id-ordered token list, as JSON")
    source: str = Field(description="where the token list was read")


class FidelityRecord(BaseModel):
    """Everything one endpoint said, token by token, on one prompt set."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(SCHEMA, alias="schema")
    engine: Engine
    engine_version: str | None = None
    model: str
    base_url: str
    top_k: int
    max_tokens: int
    system_prompt: str | None = None
    chat_template_sha256: str | None = Field(
        None, description="SHA-256 of the server's chat template text, where the server shows it"
    )
    forced: bool = Field(description="True when the answers are a reference's, not this model's")
    reference_model: str | None = None
    started_utc: str
    ended_utc: str
    prompts: list[PromptRecord]
    retries: int = Field(
        0, description="calls sent again after a transient failure (HTTP 429/5xx, lost connection)"
    )
    vocabulary: Vocabulary | None = Field(
        None, description="the checkpoint's own vocabulary, where sagemeter could read it"
    )
