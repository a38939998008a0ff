"""The MCP face (`sagemeter mcp`): see the `sagemeter.mcp` package for the tools."""

from sagemeter.mcp import ServerConfig, build_server, serve

__all__ = ["ServerConfig", "build_server", "serve"]
