"""A load generator that stays honest under load: it measures the server, not its own client.

One event loop per core (worker processes, each with a minimal HTTP/1.1 client on
`asyncio.Protocol` + `httptools`), byte-level SSE timing, closed-loop and Poisson load, a
concurrency sweep, goodput under an SLO, sharding across machines, and in every run the client's
own lag, CPU and achieved concurrency, so a run that measured the client says so (`valid: false`).

This package's `__init__` stays empty on purpose: the worker processes import only the modules
on their hot path (no pydantic, no numpy), which keeps their start-up short.
"""
