"""`quiet` tests: the other pytest-xdist workers hold off while one runs.

A tier's parallel part runs its tests on several xdist workers, which share two cores. Most
tests tolerate that; a few drive a real load whose client must never lag (sagemeter refuses
the figure when it does) beside a server their module starts once, so they cannot move to the
`alone` part without that server starting a second time. Marked `quiet`, such a test takes its
turn in the parallel part: it holds a run-wide lock exclusively while every other test holds
it shared, so it starts once the other workers' current tests have ended and they start no
new one until it has.

The lock wraps a test's whole protocol (setup, call, teardown, and the reruns of
pytest-rerunfailures), so a module's server starting in another worker's setup holds off a
quiet test too. A turnstile lets no new shared holder in while a quiet test waits, so a quiet
test is never starved by a stream of others. Outside xdist (one process) there is nothing to
hold off and no lock is taken, unless SAGEMETER_TEST_TURNS names a folder: `scripts/test-tier`
sets it when a tier's `alone` tests run in a pytest of their own beside the workers part, so
that a quiet test holds them off too.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest

MARKER = "quiet"  # registered in pyproject.toml
TURNS = "quiet-turns.lock"
TURNSTILE = "quiet-turnstile.lock"
SHARED_TURNS = "SAGEMETER_TEST_TURNS"  # a folder the parts of a tier share (scripts/test-tier)


_shared = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Takes SAGEMETER_TEST_TURNS out of the environment (an xdist worker has it from its
    controller): a pytest a test starts is no part of this run, and a quiet test of its own
    waiting for this run's turn would wait for the test that started it."""
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    shared = os.environ.pop(SHARED_TURNS, None) or workerinput.get(SHARED_TURNS)
    if shared:
        config.stash[_shared] = shared


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller gives each worker it starts the shared folder."""
    shared = node.config.stash.get(_shared, None)
    if shared:
        node.workerinput[SHARED_TURNS] = shared


def run_folder(config: pytest.Config) -> Path | None:
    """The folder every pytest process of this run shares: the one SAGEMETER_TEST_TURNS named,
    else the xdist workers' (pytest's base temp folder holds one per worker), else None."""
    shared = config.stash.get(_shared, None)
    if shared:
        return Path(shared)
    if not hasattr(config, "workerinput"):  # set on xdist's workers only, never inherited
        return None
    factory: Any = getattr(config, "_tmp_path_factory", None)  # set by pytest's tmp_path plugin
    if factory is None:
        return None
    return Path(factory.getbasetemp()).parent


def take_turn(folder: Path, *, exclusive: bool) -> IO[str]:
    """The run's turn, held by the returned open file until `end_turn`: alone when
    `exclusive`, beside the others' shared turns otherwise."""
    turns = open(folder / TURNS, "a")  # noqa: SIM115 (held across the hook's yield)
    with open(folder / TURNSTILE, "a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(turns, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    return turns


def end_turn(turns: IO[str]) -> None:
    fcntl.flock(turns, fcntl.LOCK_UN)
    turns.close()


def is_quiet(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker(MARKER) is not None


# A quiet test followed on this worker by another quiet one keeps its turn for it, so the
# other workers do not start a test between the two (each would otherwise wait again for the
# other workers' current tests to end).
_kept: IO[str] | None = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    global _kept
    folder = run_folder(item.config)
    if folder is None:
        return (yield)
    quiet = is_quiet(item)
    if _kept is not None and not quiet:  # (never: a turn is kept only for a quiet next test)
        end_turn(_kept)
        _kept = None
    turns = _kept or take_turn(folder, exclusive=quiet)
    _kept = None
    try:
        return (yield)
    finally:
        if quiet and is_quiet(nextitem):
            _kept = turns
        else:
            end_turn(turns)
