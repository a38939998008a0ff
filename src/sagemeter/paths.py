"""Where sagemeter keeps state and caches: one movable place, never inside the package.

`SAGEMETER_HOME` overrides both (tests set it per test); otherwise platformdirs honours
`XDG_STATE_HOME` and `XDG_CACHE_HOME`.
"""

from __future__ import annotations

import os
import site
from pathlib import Path

import platformdirs

APP_NAME = "sagemeter"


def _home_override() -> Path | None:
    home = os.environ.get("SAGEMETER_HOME")
    return Path(home).expanduser() if home else None


def state_dir() -> Path:
    """Records of resources sagemeter created (so nothing keeps billing untracked)."""
    home = _home_override()
    path = home / "state" if home else Path(platformdirs.user_state_dir(APP_NAME))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Derived checkpoints and other things that can be rebuilt at any time."""
    home = _home_override()
    path = home / "cache" if home else Path(platformdirs.user_cache_dir(APP_NAME))
    path.mkdir(parents=True, exist_ok=True)
    return path


def shown(path: str) -> str:
    """`path` as a shared result file should say it: a file of an installed package as
    `site-packages/…`, one under the user's home folder as `~/…`; where it was, without naming
    whose machine or which environment it was on."""
    for packages in _site_packages():
        if path.startswith(packages + os.sep):
            return "site-packages" + path[len(packages) :]
    home = str(Path.home())
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def _site_packages() -> list[str]:
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return [str(Path(folder).resolve()) for folder in folders if folder]
