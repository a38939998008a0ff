"""`serve`'s options, declared once: `sagemeter serve`'s flags and the MCP tool `start_local`'s
shared arguments are made from these fields (`sagemeter.options.faces`).

The target and the port are each face's own: the command line takes any engine's target and
port 8080, MCP a checkpoint name and a free port (0), so an assistant never collides with a
server the user runs. `--startup-timeout` is `load`'s option, taken whole.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from sagemeter.engines.llamacpp import DEFAULT_CTX_PER_SLOT, DEFAULT_PARALLEL_SLOTS, MAX_SLOTS
from sagemeter.options.base import Opt, OptionsModel, taken
from sagemeter.options.command import Command
from sagemeter.options.load import LoadOptions

MIN_CTX_PER_SLOT = 256
MAX_CTX_PER_SLOT = 131072


class ServeOptions(OptionsModel):
    """How the server `serve` starts is sized: the embedded engine's slots and their context
    (other engines ignore them), and how long it may take to answer."""

    TABLE: ClassVar[str] = "serve"

    parallel: Annotated[
        int,
        Field(ge=1, le=MAX_SLOTS, description="parallel slots (embedded engine)"),
        Opt(),
    ] = DEFAULT_PARALLEL_SLOTS
    startup_timeout: float | None = taken(
        LoadOptions,
        "startup_timeout",
        not_on=(("mcp", "start_local starts the embedded engine, which waits its own 3 min"),),
    )
    ctx_per_slot: Annotated[
        int | None,
        Field(
            ge=MIN_CTX_PER_SLOT,
            le=MAX_CTX_PER_SLOT,
            description="tokens of context per slot, prompt and reply (embedded engine)",
        ),
        Opt(
            unset=f"{DEFAULT_CTX_PER_SLOT}, as measure's: one KV cache size for both",
            not_on=(("mcp", "start_local keeps measure's context per slot: one KV cache size"),),
        ),
    ] = None


SERVE = Command("serve", models=(ServeOptions,), flag_defaults=True)
