"""Which container environment values are secrets (the values themselves are masked by the one
redaction every output goes through, `sagemeter.redaction`).

HF_TOKEN goes into the model's container environment and nowhere else; AWS keys never appear at
all. A container key is secret when it is one of the known secret variables or its last word is
KEY, SECRET, PASSWORD or TOKEN (API_KEY, DB_PASSWORD, GH_TOKEN). A word elsewhere in the name is
not a secret: SM_VLLM_TOKENIZER and SM_VLLM_MAX_NUM_BATCHED_TOKENS are settings and are shown as
they are.
"""

from __future__ import annotations

import re

from sagemeter.redaction import MASK, SECRET_ENV_VARS, redact, register_secret

__all__ = ["MASK", "is_secret_key", "redact", "redact_env", "register_secret"]

_SECRET_KEY = re.compile(r"(?:^|_)(?:KEY|SECRET|PASSWORD|TOKEN)$", re.I)


def is_secret_key(key: str) -> bool:
    """True for environment keys whose values must never be shown or stored."""
    return key.upper() in SECRET_ENV_VARS or bool(_SECRET_KEY.search(key))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """A container environment fit to print or record: secret keys' values masked."""
    return {key: (MASK if is_secret_key(key) else redact(value)) for key, value in env.items()}
