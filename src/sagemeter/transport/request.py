"""Request bytes, built once per request shape, and the model name asked of the server.

A load run sends the same bytes again and again (the same prompt and length), so the HTTP head
and JSON body are encoded once and each send is a single `transport.write` of a ready bytes
object. The measuring phases build theirs the same way, one shape at a time.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from sagemeter.errors import TransportError, UserError
from sagemeter.redaction import register_secret
from sagemeter.transport.address import ServerAddress
from sagemeter.transport.bad_json import BAD_JSON
from sagemeter.transport.http1 import connect_failure
from sagemeter.transport.models_list import first_model

DEFAULT_PROMPT = "Write a long story about a lighthouse keeper and the sea."
DISCOVERY_TIMEOUT_S = 10.0


def request_body(api: str, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    """The load body: streamed, usage on the last chunk, `ignore_eos`, temperature 0."""
    body: dict[str, Any] = {"model": model}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body.update(
        max_tokens=max_tokens,
        stream=True,
        stream_options={"include_usage": True},
        ignore_eos=True,
        temperature=0,
    )
    return body


def has_control(value: str) -> bool:
    """Whether `value` holds a character no HTTP header or request line may: C0 controls (CR
    and LF end a header early and let the rest inject one), DEL and C1 controls."""
    return any(ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in value)


def check_api_key(api_key: str | None, label: str = "the API key") -> None:
    """A key holding CR, LF or another control character would end the header early (and let
    its rest inject one): one UserError line, which never shows the value."""
    if api_key and has_control(api_key):
        raise UserError(  # no colon after the label: `API_KEY: x` is a credential's shape
            f"{label} holds a control character (CR, LF, tab or similar), which cannot go in "
            "an HTTP header; check how it was copied (the value is not shown)"
        )


def http_request(
    address: ServerAddress,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    api_key: str | None,
    *,
    stream: bool = False,
) -> bytes:
    """A whole HTTP/1.1 request, head and body, as one bytes object (keep-alive by default).

    The API key becomes a secret of this process: no output will show it (redaction.py).
    """
    register_secret(api_key)
    check_api_key(api_key)
    payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    head = [f"{method} {path} HTTP/1.1", f"Host: {address.host_header}"]
    if body is not None:
        head.append("Content-Type: application/json")
    head.append("Accept: text/event-stream" if stream else "Accept: application/json")
    head.append(f"Content-Length: {len(payload)}")
    if api_key:
        head.append(f"Authorization: Bearer {api_key}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


def request_bytes(
    address: ServerAddress, api: str, body: dict[str, Any], api_key: str | None
) -> bytes:
    """A streamed generation request to the `api` ("chat" or "completions") path."""
    return http_request(address, "POST", address.path(api), body, api_key, stream=True)


MODELS_CAP = 16 << 20  # a model list is a few KiB; a server that sends without end is refused


def discover_model(address: ServerAddress, api_key: str | None) -> str:
    """The first model id of GET /v1/models; a server that cannot be reached is a
    TransportError (exit 6), one that answers wrongly is input to fix (exit 2)."""
    url = f"{address.base_url}/v1/models"
    check_api_key(api_key)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    context = ssl.create_default_context() if address.tls else None
    try:
        with urllib.request.urlopen(
            request, timeout=DISCOVERY_TIMEOUT_S, context=context
        ) as answer:
            body = answer.read(MODELS_CAP + 1)
        if len(body) > MODELS_CAP:
            raise UserError(
                f"GET {url} answered more than {MODELS_CAP >> 20} MiB, which is no model list; "
                "name the model with --model"
            )
        listing = json.loads(body)
    except urllib.error.HTTPError as exc:
        raise UserError(
            f"GET {url} answered HTTP {exc.code}; name the model with --model"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        why = connect_failure(reason, address.tls) if isinstance(reason, OSError) else str(reason)
        raise TransportError(f"cannot reach {address.base_url}: {why}") from None
    except BAD_JSON:
        raise UserError(f"GET {url} did not answer JSON; name the model with --model") from None
    except http.client.HTTPException as exc:  # headers only, a cut body, a garbage status line
        raise UserError(
            f"GET {url} did not answer HTTP ({type(exc).__name__}): check the address, or name "
            "the model with --model"
        ) from None
    return first_model_id(listing, url)


def first_model_id(listing: Any, url: str) -> str:
    """The first `data[].id` of a /v1/models answer, or a UserError saying what was wrong."""
    first = first_model(listing)
    if first is None:
        raise UserError(f"GET {url} lists no model; name the model with --model")
    return str(first["id"])
