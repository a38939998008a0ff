"""An HTTP server's address from its URL: where to connect, TLS or not, the Host header, the
API's base path."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from sagemeter.errors import UserError

API_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass(frozen=True)
class ServerAddress:
    """host and port to connect to, TLS or not, the Host header, and the API's base path."""

    host: str
    port: int
    tls: bool
    host_header: str
    base_path: str

    @property
    def base_url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host_header}{self.base_path}"

    def path(self, api: str) -> str:
        return self.base_path + API_PATHS[api]


HINT = "give http://HOST:PORT (with /v1 or not), e.g. http://127.0.0.1:8000"


def refuse_unsendable(url: str) -> None:
    """One UserError line for a URL holding whitespace or a control character: urlsplit drops
    CR, LF and tab silently (`/v1\\r\\nX: 1` would become the path `/v1X: 1`) and keeps
    spaces and other controls, which would break the request line or a header."""
    if any(char.isspace() or ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in url):
        raise UserError(
            f"target {url!r} holds a space or a control character, which cannot go in an HTTP "
            f"request; {HINT}"
        )


def parse_address(url: str) -> ServerAddress:
    """`http(s)://HOST[:PORT][/prefix][/v1]` → ServerAddress; else a one-line UserError."""
    hint = HINT
    refuse_unsendable(url.strip())
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UserError(f"target {url!r}: {exc}; {hint}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"target {url!r} is not an http(s) URL; {hint}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise UserError(f"target {url!r}: no query, fragment or credentials in the URL; {hint}")
    tls = parts.scheme == "https"
    if port == 0:
        raise UserError(f"target {url!r}: port 0 is no server's port; {hint}")
    if port is None:
        port = 443 if tls else 80
    host = parts.hostname
    host_header = f"[{host}]" if ":" in host else host
    if port != (443 if tls else 80):
        host_header = f"{host_header}:{port}"
    base = parts.path.rstrip("/")
    base = base.removesuffix("/v1")
    return ServerAddress(host=host, port=port, tls=tls, host_header=host_header, base_path=base)
