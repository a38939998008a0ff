"""Keep secrets out of everything sagemeter prints or writes.

HF_TOKEN goes into the model's container environment and nowhere else; AWS keys never appear at
all. Every message that leaves the library (errors, log lines, records, tags) passes through
`redact`, which knows the secret values of this process's environment and the shapes of tokens.
"""

from __future__ import annotations

import os
import re
import threading

MASK = "***"

# Environment variables whose values are secrets wherever they show up.
SECRET_ENV_VARS = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ACCESS_KEY_ID",
)

# Container environment keys whose values are never recorded (user `--env` included): the known
# secret variables, and any name whose last word is KEY, SECRET, PASSWORD or TOKEN (API_KEY,
# DB_PASSWORD, GH_TOKEN). A word elsewhere in the name is not a secret: SM_VLLM_TOKENIZER and
# SM_VLLM_MAX_NUM_BATCHED_TOKENS are settings and are shown as they are.
_SECRET_KEY = re.compile(r"(?:^|_)(?:KEY|SECRET|PASSWORD|TOKEN)$", re.I)

_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{16,}\b"),  # Hugging Face user access tokens
    re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{16}\b"),  # AWS access key ids
)

_extra: set[str] = set()
_lock = threading.Lock()


def is_secret_key(key: str) -> bool:
    """True for environment keys whose values must never be shown or stored."""
    return key.upper() in SECRET_ENV_VARS or bool(_SECRET_KEY.search(key))


def register_secret(value: str | None) -> None:
    """Remember a secret value met at run time (e.g. `--env API_KEY=...`) so it is masked too."""
    if value and len(value) >= 6:
        with _lock:
            _extra.add(value)


def _secret_values() -> list[str]:
    values = [os.environ.get(name, "") for name in SECRET_ENV_VARS]
    with _lock:
        values.extend(_extra)
    # Longest first, so a secret containing another is masked whole.
    return sorted((v for v in values if len(v) >= 6), key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every known secret value and every token-shaped string masked."""
    for value in _secret_values():
        if value in text:
            text = text.replace(value, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    return text


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """A container environment fit to print or record: secret keys' values masked."""
    return {key: (MASK if is_secret_key(key) else redact(value)) for key, value in env.items()}
