"""The files that hold `alone` tests, written down by a tier's workers part as it deselects them.

A tier runs in two parts (`scripts/test-tier`): its other tests on pytest-xdist workers, then its
`alone` tests one at a time in a new pytest process. That process would collect every test module
again (about 6 CPU-seconds on a slow two-core host) to keep the few that hold `alone` tests. The
workers part has collected them all already: when SAGEMETER_TEST_ALONE_FILES names a folder,
each process writes there the files of the `alone` tests it deselected, and the script gives the
second part those files only. The tier's marker still selects within them.

Only files under this module's own folder are written: a pytest that a test starts inherits the
variable, and its own tests (in a temporary tree) are no files of the tier's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ALONE_FILES = "SAGEMETER_TEST_ALONE_FILES"
HERE = Path(__file__).resolve().parent


def pytest_deselected(items: list[pytest.Item]) -> None:
    folder = os.environ.get(ALONE_FILES)
    if not folder:
        return
    files = sorted(
        {
            str(item.path)
            for item in items
            if item.get_closest_marker("alone") and item.path.is_relative_to(HERE)
        }
    )
    if files:  # one file per process (xdist's workers collect side by side), appended to
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(Path(folder) / name, "a") as out:
            out.write("".join(f"{file}\n" for file in files))
