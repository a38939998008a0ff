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


def host_port(host: str, port: int) -> str:
    """`HOST:PORT` as a person writes it, an IPv6 host in brackets (`[::1]:8000`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# What a user may paste after the base: the API's own paths (a URL copied from a client's
# settings often ends in /v1/chat/completions). The base is what is recorded and asked.
API_SUFFIXES = ("/v1/chat/completions", "/v1/completions", "/v1/models", "/v1")
HINT = "give http://HOST:PORT (with /v1 or not), e.g. http://127.0.0.1:8000"


def refuse_unsendable(url: str) -> None:
    """One UserError line for a URL holding whitespace or a control character: urlsplit drops
    CR, LF and tab silently (`/v1\\r\\nX: 1` would become the path `/v1X: 1`) and keeps
    spaces and other controls, which would break the request line or a header."""
    if any(char.isspace() or ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in url):
        raise UserError(
            f"target {url!r}: a URL holds no spaces or control characters (none can go in an "
            f"HTTP request); {HINT}"
        )


def parse_address(url: str) -> ServerAddress:
    """`http(s)://HOST[:PORT][/prefix][/v1[/chat/completions]]` → ServerAddress; else one
    UserError line naming what is wrong. The one parser of a server's URL: targets, load, the
    transport and every MCP tool read a URL through it, so each accepts and records the same
    base (an API path pasted after /v1 is dropped; the base is what results keep)."""
    text = url.strip()
    refuse_unsendable(text)
    if not text.lower().startswith(("http://", "https://")):
        raise UserError(f"target {url!r} is not an http(s) URL; {HINT}")
    try:
        parts = urlsplit(text)
        hostname, port = parts.hostname, parts.port
    except ValueError:  # an unclosed [ of an IPv6 address, a port not a number or too large
        netloc = text.split("//", 1)[1].split("/", 1)[0]
        if netloc.count("[") != netloc.count("]"):
            problem = "an IPv6 host's brackets do not close (write http://[::1]:8000)"
        else:
            problem = "has a bad port: give a number from 1 to 65535"
        raise UserError(f"target {url!r}: {problem}; {HINT}") from None
    if not hostname:
        raise UserError(f"target {url!r} has no host; {HINT}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise UserError(f"target {url!r}: no query, fragment or credentials in the URL; {HINT}")
    tls = parts.scheme == "https"
    if port == 0:
        raise UserError(f"target {url!r}: port 0 is no server's port; {HINT}")
    if port is None:
        port = 443 if tls else 80
    host_header = f"[{hostname}]" if ":" in hostname else hostname
    if port != (443 if tls else 80):
        host_header = f"{host_header}:{port}"
    base = parts.path.rstrip("/")
    for suffix in API_SUFFIXES:
        if base.endswith(suffix):
            base = base[: -len(suffix)].rstrip("/")
            break
    return ServerAddress(host=hostname, port=port, tls=tls, host_header=host_header, base_path=base)
