"""How one request reaches a running endpoint and how it is timed: one engine for every phase.

The OpenAI-compatible HTTP engine (kept-alive HTTP/1.1 on `asyncio.Protocol` + `httptools`,
server-sent events split at the byte level, one token-event rule, worker processes for requests
at once) serves `sagemeter load` and every phase of `sagemeter measure`; the SageMaker runtime
(boto3) sits behind the same request and record types.

This package's `__init__` stays empty on purpose: the worker processes import only the modules
on their hot path (no pydantic, no numpy), which keeps their start-up short.
"""
