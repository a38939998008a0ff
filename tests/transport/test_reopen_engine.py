"""`load` against the real embedded llama.cpp server, which closes kept-alive connections
between requests: nothing may be lost to that (it lost about half its requests before)."""

from __future__ import annotations

import pytest

from sagemeter.loadgen.loadrun import run_once
from sagemeter.loadgen.settings import LoadSettings


@pytest.mark.slow
def test_load_at_4_at_once_against_llama_cpp_loses_no_request(engine_url: str) -> None:
    # 3 s: about 110 replies, each on a connection llama.cpp closed after the one before (6 s
    # sent about 210, every one reopened the same way).
    settings = LoadSettings(
        target=engine_url, max_tokens=4, concurrency=4, duration_s=3.0, timeout_s=120.0
    )
    # A fresh engine's first replies take seconds; warm it so the run reuses connections.
    run_once(settings.model_copy(update={"duration_s": 0.5}), started=0.0)
    result = run_once(settings, started=0.0)
    assert result.requests_failed == 0, result.problems
    # More requests than streams: connections were reused (or reopened) after a reply.
    assert result.requests_completed > 4, (result.requests_completed, result.requests_reopened)
    assert result.output_tokens == 4 * result.requests_completed
