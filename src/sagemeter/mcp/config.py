"""What one running MCP server may do, and where it writes: fixed when it starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sagemeter.paths import state_dir
from sagemeter.sagemaker.endpoint import DEFAULT_POLL_S

WRITE_FLAG = "--allow-write"
LOGS_FLAG = "--allow-logs"
COMMANDS_FLAG = "--allow-commands"


def default_results_dir() -> Path:
    """Result files of the MCP face: in the user's state dir, since a client may start the
    server in any working directory (often one it cannot write)."""
    return state_dir() / "mcp-results"


@dataclass(frozen=True)
class ServerConfig:
    """The server's permissions and places; the tools read it, the assistant cannot change it."""

    allow_write: bool = False
    allow_logs: bool = False
    allow_commands: bool = False  # cmd: targets run a command line the assistant wrote
    results_dir: Path = field(default_factory=default_results_dir)
    poll_s: float = DEFAULT_POLL_S
