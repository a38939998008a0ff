"""The engine registry's public name for plug-ins (`from sagemeter.engines.registry import
Engine, StartRequest`): the registry itself is `sagemeter.engine_registry`, below the engines
and `targets`, which parses `ENGINE:SPEC` through it."""

from sagemeter.engine_registry import (
    BUILT_IN,
    ENGINE_PREFIX,
    GROUP,
    DescribesServing,
    Engine,
    Served,
    ServeWords,
    StartRequest,
    engine_in,
    engine_named,
    engine_of,
    engines,
    serve_words,
)

__all__ = [
    "BUILT_IN",
    "ENGINE_PREFIX",
    "GROUP",
    "DescribesServing",
    "Engine",
    "ServeWords",
    "Served",
    "StartRequest",
    "engine_in",
    "engine_named",
    "engine_of",
    "engines",
    "serve_words",
]
