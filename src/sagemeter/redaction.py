"""One redaction for everything that leaves the process: terminal, files, logs, MCP answers.

A server may echo a request's `Authorization` header in an error body, an AWS error may quote an
access key id, a traceback may hold an environment value: each of those would otherwise reach a
result file or the screen. Two nets catch them: the secret values this process knows (the API key
in use, registered by the face that got it, and the credentials in its environment), and the
shapes credentials have (bearer tokens, `Authorization` and `x-api-key` values, AWS access key
ids, Hugging Face and OpenAI-style keys). Both are replaced by `***`.

A known value is masked in every form a server or a writer may give it back in: as it is,
JSON-escaped (a key holding `"` or `\\` is `\\"` inside a JSON string), with non-ASCII as
`\\uXXXX`, URL-encoded and HTML-escaped. Writers redact the raw values before they encode them
(`redact_tree`, then the encoded text again as a second net), and a text cut to a length (an
error body read up to a cap, a line shortened for the screen) is redacted before the cut, or
with `redact(text, cut=True)`, which also masks a tail that begins a known value.

A streamed reply is redacted whole: files get its joined text, and text shown as it arrives goes
through `StreamRedaction`, which holds back what could begin a secret split across pieces.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Callable

from sagemeter.streams import DelegatingStream

MASK = "***"
SHORTEST_SECRET = 6  # shorter values would mask ordinary words
# Environment variables whose values are secrets wherever they show up.
SECRET_ENV_VARS = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "OPENAI_API_KEY",
)
_SHAPES = (
    # `Authorization: Bearer x`, `"authorization": "x"`, `x-api-key: x` (header or JSON echo)
    # A value runs through backslash escapes (`kq\\"ey` in JSON text is one value, not `kq\\`).
    re.compile(
        r"(?i)((?:authorization|x-api-key|api[_-]?key)[\"']?\s*[:=]\s*[\"']?)"
        r"(?:bearer\s+)?(?:\\.|[^\s\"',;}\\])+"
    ),
    re.compile(r"(?i)(bearer\s+)(?:\\.|[A-Za-z0-9._~+/=-]){6,}"),
    re.compile(r"()\b(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"()\bhf_[A-Za-z0-9]{16,}\b"),  # Hugging Face user access tokens
    re.compile(r"()\bsk-[A-Za-z0-9_-]{16,}\b"),
)

# A shape's label left at the end of a streamed text: its value may come in the next piece.
_LABEL_AT_END = re.compile(r"(?i)(?:authorization|x-api-key|api[_-]?key|bearer)\S*\s*$")

_known: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Never let `value` leave the process (an API key given on the command line, a value of
    `--env API_KEY=…`)."""
    if value and len(value) >= SHORTEST_SECRET:
        with _lock:
            _known.add(value)


def known_secrets() -> tuple[str, ...]:
    """The values registered so far, for a child process that must mask them too (a load
    worker cuts a server's error to a line, and a half-cut secret is no longer recognised)."""
    with _lock:
        return tuple(sorted(_known))


@functools.lru_cache(maxsize=256)
def encoded_forms(value: str) -> frozenset[str]:
    """`value` as it is and as JSON (once, or twice: a server's JSON error body quoted inside
    a result file) and URLs encode it: what a file or an echo may hold."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    return frozenset(
        {
            value,
            escaped,
            json.dumps(escaped, ensure_ascii=False)[1:-1],
            json.dumps(value)[1:-1],
            urllib.parse.quote(value, safe=""),
            urllib.parse.quote_plus(value, safe=""),
            html.escape(value),
        }
    )


def _secret_values() -> list[str]:
    values = [os.environ.get(name, "") for name in SECRET_ENV_VARS]
    with _lock:
        values.extend(_known)
    forms = {form for v in values if len(v) >= SHORTEST_SECRET for form in encoded_forms(v)}
    # Longest first, so a secret containing another is masked whole.
    return sorted(forms, key=len, reverse=True)


CUT_PREFIX = 3  # a cut text's tail this long or longer that begins a known value is masked


def redact(text: str, *, cut: bool = False) -> str:
    """`text` with every known secret value and every credential-shaped string masked; with
    `cut` (the text was cut to a length, so a secret may end it half), also a tail of at least
    CUT_PREFIX characters that begins a known value."""
    secrets = _secret_values()
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if cut:
        for secret in secrets:
            for size in range(min(len(secret) - 1, len(text)), CUT_PREFIX - 1, -1):
                if text.endswith(secret[:size]):
                    text = text[:-size] + MASK
                    break
    for shape in _SHAPES:
        text = shape.sub(lambda match: match.group(1) + MASK, text)
    return text


def redact_tree(value: object) -> object:
    """`value` (JSON-like) with every string, keys too, redacted as it is, before any encoding:
    a key holding `"` is whole here, and a shape's value ends where the secret does."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_tree(key): redact_tree(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(item) for item in value]
    return value


class StreamRedaction:
    """Redaction for text shown as it arrives, piece by piece (a streamed reply printed token by
    token): a secret a server sends split across pieces (`sk-te`, then `st123`) is in no piece,
    so each piece alone would pass `redact`. What could still be the start of a secret is held
    back: the trailing run of non-space characters (a credential shape is one such run) and
    any tail that begins a known value; the rest is redacted and passed to `emit`. `close`
    passes the remainder, redacted."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._pending = ""

    def feed(self, piece: str) -> None:
        self._pending += piece
        cut = self._safe_end(self._pending)
        if cut > 0:
            self._emit(redact(self._pending[:cut]))
            self._pending = self._pending[cut:]

    def close(self) -> None:
        if self._pending:
            self._emit(redact(self._pending))
        self._pending = ""

    @staticmethod
    def _safe_end(text: str) -> int:
        """Where `text` may be cut: before its last word, and before any tail that begins (or
        any known value that spans) the cut."""
        match = re.search(r"\S*$", text)
        cut = match.start() if match else len(text)
        # The word before may be a shape's label (`Bearer`, `Authorization:`): keep it too.
        label = _LABEL_AT_END.search(text[:cut])
        if label is not None:
            cut = label.start()
        for secret in _secret_values():
            start = text.rfind(secret[0], max(0, cut - len(secret) + 1), cut)
            while start != -1:
                if secret.startswith(text[start : start + len(secret)]):
                    cut = start
                start = text.rfind(secret[0], max(0, cut - len(secret) + 1), start)
        return cut


class RedactingStream(DelegatingStream):
    """A text stream wrapper that redacts every write (for the terminal consoles)."""

    def write(self, text: str) -> int:
        return self._stream.write(redact(text))
