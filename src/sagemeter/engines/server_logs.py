"""An HTTP target's own log, handed to `measure`: a file (`--server-log`) or a container's
output (`--docker`, read with `docker logs`), parsed for its start-up facts.

sagemeter starts `local:` and `vllm:` targets itself and keeps their logs; a server someone else
started only shows its log when told where it is. The log is read before anything is measured,
so a wrong path or container fails at once; its facts are labelled with where they came from.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sagemeter.errors import UserError
from sagemeter.results import StartupFacts
from sagemeter.startup_log import parse_startup_log
from sagemeter.targets import OpenAITarget, Target
from sagemeter.textfiles import read_log

DOCKER_TIMEOUT_S = 60.0


def check_log_options(target: Target, server_log: Path | None, docker: str | None) -> None:
    """One line for options that cannot work together or with this target."""
    if server_log is None and docker is None:
        return
    if server_log is not None and docker is not None:
        raise UserError("give --server-log FILE or --docker CONTAINER, not both")
    if not isinstance(target, OpenAITarget):
        flag = "--server-log" if server_log is not None else "--docker"
        raise UserError(
            f"{flag} is for http:// targets; sagemeter reads the log of {target} itself"
        )


def read_server_log(server_log: Path | None, docker: str | None) -> StartupFacts | None:
    """The start-up facts of the given log (None when no log was given)."""
    if server_log is not None:
        return parse_startup_log(_read_file(server_log), origin=f"--server-log {server_log}")
    if docker is not None:
        return parse_startup_log(docker_logs(docker), origin=f"docker logs {docker}")
    return None


def _read_file(path: Path) -> str:
    """The log's text; a FIFO, a device, a UTF-16 file or more than 64 MiB is one line."""
    return read_log(path, what="--server-log")


def docker_logs(container: str) -> str:
    """`docker logs CONTAINER`, stdout and stderr together (vLLM logs to both)."""
    docker = shutil.which("docker")
    if docker is None:
        raise UserError(f"--docker {container}: the docker command is not on PATH")
    try:
        completed = subprocess.run(
            [docker, "logs", container],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=DOCKER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"docker logs {container} did not finish in {DOCKER_TIMEOUT_S:.0f} s"
        ) from None
    text = completed.stdout.decode("utf-8", "replace")
    if completed.returncode != 0:
        first = (text.strip().splitlines() or [f"exit {completed.returncode}"])[0]
        raise UserError(f"docker logs {container} failed: {first}")
    return text
