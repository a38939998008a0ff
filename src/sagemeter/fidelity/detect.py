"""Which engine serves a URL: asked of the server itself, with an explicit override.

`/v1/models` names its owner (`owned_by`: `vllm` for vLLM, `llamacpp` for llama.cpp); where
that is inconclusive, llama.cpp's own `/props` (its generation defaults) settles it. SGLang
(`sglang`) and Ollama (`library`) are recognised only to say they are not supported.
"""

from __future__ import annotations

from typing import cast, get_args

from sagemeter.errors import UserError
from sagemeter.fidelity.adapter import FidelityEngine
from sagemeter.fidelity.llamacpp import LlamaCppEngine
from sagemeter.fidelity.vllm import VllmEngine
from sagemeter.results.fidelity_record import Engine
from sagemeter.transport.address import parse_address
from sagemeter.transport.client import HttpClient, TransportError
from sagemeter.transport.models_list import first_model

ENGINES: tuple[str, ...] = get_args(Engine)
OWNERS: dict[str, Engine] = {"vllm": "vllm", "llamacpp": "llamacpp"}
UNSUPPORTED_OWNERS = {"sglang": "SGLang", "library": "Ollama"}


def server_root(base_url: str) -> str:
    """`http://host:port[/prefix]` from a URL given with or without its trailing /v1."""
    return parse_address(base_url).base_url


def check_engine(engine: str) -> Engine:
    """An engine name given by the user, checked."""
    if engine in ENGINES:
        return cast(Engine, engine)
    raise UserError(f"engine {engine!r} is not supported for fidelity; use one of {ENGINES}")


async def detect_engine(http: HttpClient) -> Engine:
    """The engine behind `http` (based at the server root), or a UserError saying why not."""
    owner = None
    base_url = http.address.base_url
    try:
        reply = await http.call_json("GET", "/v1/models")
    except TransportError as exc:
        raise UserError(f"{base_url}: cannot reach the server ({exc})") from None

    first = first_model(reply.payload) if reply.status == 200 else None
    owner = None if first is None else first.get("owned_by")
    if isinstance(owner, str) and owner in OWNERS:
        return OWNERS[owner]
    if isinstance(owner, str) and owner in UNSUPPORTED_OWNERS:
        raise UserError(
            f"{base_url} is {UNSUPPORTED_OWNERS[owner]}, which token-level fidelity does not "
            "support (see docs/fidelity.md)"
        )
    try:
        props = await http.call_json("GET", "/props")
        facts = props.payload if props.status == 200 else None
        if isinstance(facts, dict) and "default_generation_settings" in facts:
            return "llamacpp"
    except TransportError:
        pass
    raise UserError(
        f"cannot tell which engine serves {base_url} (owned_by: {owner!r}); fidelity supports "
        f"llama.cpp and vLLM: say which with engine='llamacpp' or engine='vllm'"
    )


def engine_for(engine: Engine, http: HttpClient) -> FidelityEngine:
    if engine == "vllm":
        return VllmEngine(http)
    return LlamaCppEngine(http)
