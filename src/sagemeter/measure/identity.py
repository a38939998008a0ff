"""The server's identity between phases: a server swapped for another model mid-measure is seen.

The identity is what `/v1/models` says: the first model's id and a digest of the whole answer
(each entry's `created` and vLLM's `permission` left out: vLLM and llama.cpp stamp `created` with
the time of the call, and vLLM gives every answer's permission a new random id),
and for a server sagemeter started, its process (the pid, and whether it still runs).
It is read before the first phase, again at every phase boundary and at the end: one cheap GET
each. A change ends the measurement's trust in what follows: the phases after it are not
measured, and the result says why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sagemeter.results.model import ServerIdentity
from sagemeter.transport.client import HttpClient, TransportError
from sagemeter.transport.retry import RetryPolicy

RETRY = RetryPolicy(retries=2, base_s=0.25, max_s=2.0)


@dataclass(frozen=True)
class Identity:
    """One reading of `/v1/models`: the first model's id and the answer's digest."""

    model: str | None
    models_sha256: str
    process: str | None = None


VOLATILE_KEYS = frozenset({"created", "permission"})  # new in every answer of the same server


def _steady(value: Any) -> Any:
    """`value` without the keys that change from one answer to the next, at any depth."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_steady(item) for item in value]
    return value


def identity_of(payload: Any) -> Identity | None:
    """The identity a `/v1/models` answer gives, or None when it is not a model list."""
    models = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(models, list):
        return None
    steady = [_steady(entry) for entry in models]
    digest = hashlib.sha256(json.dumps(steady, sort_keys=True).encode()).hexdigest()
    from sagemeter.transport.models_list import first_model

    first = first_model(payload)
    return Identity(model=None if first is None else str(first["id"]), models_sha256=digest)


def change_reason(before: Identity, after: Identity | None, between: str) -> str | None:
    """Why `after` is another server than `before` (None: the same); `between` names where."""
    if after is None:
        return f"the server's model list could not be read again {between}"
    if after.model != before.model:
        return f"the server's model changed from {before.model} to {after.model} {between}"
    if after.models_sha256 != before.models_sha256:
        return f"the server's model list changed {between} (model {before.model})"
    if after.process != before.process:
        return f"the server's process changed from {before.process} to {after.process} {between}"
    return None


class IdentityWatch:
    """Reads the identity at the start, checks it at each boundary; remembers the first change.

    A server without `/v1/models` (SageMaker, a proxy that hides it) is not watched: its
    identity is unknown from the start, and nothing is claimed about it.
    """

    def __init__(
        self,
        root: str | None,
        api_key: str | None = None,
        process: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.http = HttpClient(root, api_key=api_key) if root else None
        self.process = process
        self.first: Identity | None = None
        self.checked: list[str] = []
        self.changed: str | None = None

    async def _read(self) -> Identity | None:
        assert self.http is not None
        try:
            # A transient failure of this one GET is sent again: it is no change of model.
            reply = await self.http.call_json("GET", "/v1/models", timeout_s=10.0, retry=RETRY)
        except TransportError:
            return None
        found = identity_of(reply.payload) if reply.status == 200 else None
        return None if found is None else replace(found, process=self.process())

    async def open(self) -> None:
        """The identity before the first phase."""
        if self.http is not None:
            self.first = await self._read()

    async def check(self, before: str, after: str | None) -> str | None:
        """Read again after phase `before` (and before `after`, None: the end); the first change
        is kept and returned, and every later check returns it unread."""
        if self.changed is not None or self.first is None:
            return self.changed
        if after is None:
            between = f"after the {before} phase"
            self.checked.append(before)
        else:
            between = f"between the {before} and {after} phases"
            self.checked.append(f"{before}/{after}")
        self.changed = change_reason(self.first, await self._read(), between)
        return self.changed

    def record(self) -> ServerIdentity | None:
        """What the result keeps: the identity first read, the boundaries checked, any change."""
        if self.first is None:
            return None
        return ServerIdentity(
            model=self.first.model,
            models_sha256=self.first.models_sha256,
            process=self.first.process,
            checked=list(self.checked),
            changed=self.changed,
        )

    async def close(self) -> None:
        if self.http is not None:
            await self.http.aclose()
