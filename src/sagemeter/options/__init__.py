"""Each command's options declared once, as a pydantic model, and the faces built from it: the
command line's flags, a plan's tables and the MCP tools' arguments (see docs/extending.md)."""
