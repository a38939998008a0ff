"""The one rule for servers sagemeter starts on 127.0.0.1: a request must name a loopback host.

A page in a browser can make its own name resolve to 127.0.0.1 (DNS rebinding) and then talk to
a local server as if it were its own site; the browser still sends the page's name in `Host`.
So every loopback server sagemeter starts that answers HTTP (the embedded engine, through
`hostguard`; `calibrate-server`; `mcp --http`) answers a `Host` that is not a loopback name or
address with 421 and nothing else. A request with no `Host` (HTTP/1.0) is let through: a
browser always sends one.
"""

from __future__ import annotations

import ipaddress

MISDIRECTED = 421
REFUSAL = "the Host header must name this machine's loopback (127.0.0.1, localhost or [::1])"
# `mcp --http`'s SDK takes patterns: a port-less Host is refused there, which no browser sends.
ALLOWED_HOST_PATTERNS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
ALLOWED_ORIGIN_PATTERNS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def _name(host: str) -> str:
    """The name or address of a `Host` value, without its port."""
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def is_loopback_host(value: str | bytes | None) -> bool:
    """Whether a `Host` header names the loopback: `localhost` (or a name under `.localhost`,
    which browsers never resolve through DNS), 127.0.0.0/8 or ::1, with any port; absent is
    allowed (see the module note)."""
    if value is None:
        return True
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    name = _name(text.strip()).lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def refusal_response() -> bytes:
    """The whole HTTP/1.1 answer to a request that names another host: 421, then closed."""
    body = ('{"error":{"message":"' + REFUSAL + '","code":421}}').encode()
    head = (
        f"HTTP/1.1 {MISDIRECTED} Misdirected Request\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
