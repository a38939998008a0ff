"""The MCP face: the deploy → measure → compare → delete loop as tools for an AI assistant.

`build_server(config)` returns the official SDK's `MCPServer` with every tool registered;
`sagemeter mcp` (cli/mcp.py) runs it on stdio or streamable HTTP. Each tool is a thin call of the
same library function the CLI calls; this package adds only what a server needs: permissions,
progress notifications, cancellation, and replies with structured content and a short text.
"""

from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.server import build_server, serve

__all__ = ["ServerConfig", "build_server", "serve"]
