"""An upstream error's body in one short line: what a person reads, not the page a proxy sent.

Servers and the proxies before them answer errors with JSON (`{"error": {"message": …}}`), plain
text, or whole HTML pages that repeat themselves. Every error sagemeter shows that quotes such a
body goes through `one_line`: the JSON's message, or the HTML's title (else its text without
tags), whitespace collapsed, a phrase said twice in a row said once, cut to `MAX_CHARS`.

Secrets are masked first, on the body as it came (which may itself be cut at a cap), and again
after each step that decodes it (JSON's escapes, HTML's entities): collapsing whitespace or
cutting to a length would otherwise leave a half a redaction no longer recognises.
"""

from __future__ import annotations

import html
import json
import re

from sagemeter.redaction import redact
from sagemeter.transport.bad_json import BAD_JSON

MAX_CHARS = 160
_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"<(title|h1)\b[^>]*>(.*?)</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_REPEAT = re.compile(r"(\b\w.{3,240}?\b)(?:\W+\1\b)+", re.DOTALL)
_SCAN_CHARS = 4000  # of the body; the first meaningful words are near its start


def one_line(body: bytes | str | None, limit: int = MAX_CHARS) -> str:
    """The body's first meaningful words on one line, at most `limit` characters ('' if none)."""
    if body is None:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = redact(text, cut=True)
    text = redact(_json_message(text) or text)
    if "<" in text and ">" in text:
        text = redact(_html_text(text))
    text = " ".join(text.split())[:_SCAN_CHARS]
    text = _REPEAT.sub(r"\1", text)
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def status_line(status: int, body: bytes | str | None) -> str:
    """`HTTP 500: Internal Server Error`, or `HTTP 500` for an empty body."""
    text = one_line(body)
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


def _json_message(text: str) -> str | None:
    """The message of a JSON error body, whatever its shape; None when it is not JSON."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        payload = json.loads(stripped)
    except BAD_JSON:
        return None
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        for holder in (error, payload):
            if isinstance(holder, dict):
                for key in ("message", "detail", "msg"):
                    if isinstance(holder.get(key), str):
                        return str(holder[key])
        if isinstance(error, str):
            return error
    return json.dumps(payload)


def _html_text(text: str) -> str:
    text = _HIDDEN.sub(" ", text)
    titled = _TITLE.search(text)
    if titled is not None and _TAG.sub(" ", titled.group(2)).strip():
        text = titled.group(2)
    return html.unescape(_TAG.sub(" ", text))
