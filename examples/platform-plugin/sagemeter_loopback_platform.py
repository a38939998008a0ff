"""`[arm.loopback]`: sagemeter's calibrate-server (known timing) on 127.0.0.1 as a platform.

A complete example of the `sagemeter.platforms` entry-point group: a plan table, and one object
that checks it, prices it, "deploys" it (starts a calibrate-server in a process group of its
own, so it outlives a killed run the way a cloud endpoint does), adopts it on `--resume` when it
still answers, and deletes it (TERM, then KILL). Its price is the table's fixed hourly price.

    [[arm]]
    name = "fast"
    [arm.loopback]
    ttft = "20ms"
    itl = "2ms"
    price_per_hour = 1.5
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from sagemeter.calibrate.timing import parse_duration
from sagemeter.errors import PlatformError, UserError
from sagemeter.experiment.plan import Arm, Plan
from sagemeter.platforms.deployment import Deployment
from sagemeter.platforms.registry import CheckProblems, Facts, Hooks, Platform, Price
from sagemeter.targets import OpenAITarget, Target

HOST = "127.0.0.1"
STOP_WAIT_S = 5.0  # after TERM, before KILL
# The servers this process started, so a delete reaps its own child (no zombie left).
_STARTED: dict[int, subprocess.Popen[bytes]] = {}


class LoopbackArm(BaseModel):
    """`[arm.loopback]`: the server's timing and the price it is billed at."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft: str = Field("20ms", description="time to first token: 20ms, 0.02s")
    itl: str = Field("2ms", description="time between tokens")
    price_per_hour: float = Field(gt=0, description="USD per hour while it runs")
    startup_timeout: float = Field(30.0, gt=0, description="seconds until /v1/models answers")


class LoopbackRecord(BaseModel):
    """A deployment's own fields in the journal (`record`)."""

    folder: str  # its port file and log
    pid: int | None = None
    url: str | None = None  # http://127.0.0.1:PORT/v1


@dataclass
class Checked:
    plan: Plan


def _table(arm: Arm) -> LoopbackArm:
    assert isinstance(arm.table, LoopbackArm)
    return arm.table


def _is_ours(pid: int | None) -> bool:
    """The process `pid` is alive and a calibrate-server (a reused pid is not ours)."""
    if pid is None:
        return False
    child = _STARTED.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"calibrate-server" in command


def _answers(url: str | None) -> bool:
    if url is None:
        return False
    try:
        return httpx.get(f"{url}/models", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class LoopbackPlatform:
    """The registry's entry: its name is the plan table's, `[arm.loopback]`."""

    name = "loopback"

    def table(self, data: Mapping[str, Any]) -> BaseModel:
        return LoopbackArm.model_validate(data)

    def plan_problems(self, plan: Plan, arms: Sequence[Arm]) -> list[str]:
        return []  # every arm has its own server: no name to collide

    def check(
        self, plan: Plan, arms: Sequence[Arm], *, fresh: bool, need_credentials: bool
    ) -> Checked:
        problems = []
        for arm in arms:
            for key in ("ttft", "itl"):
                try:
                    parse_duration(getattr(_table(arm), key), key)
                except UserError as exc:
                    problems.append(f'arm "{arm.name}".loopback.{key}: {exc}')
        if problems:
            raise CheckProblems(problems)
        return Checked(plan)

    def price(self, checked: object, arm: Arm, price_per_hour: float | None) -> Price:
        if price_per_hour is not None:
            return Price(price_per_hour, "price_per_hour")
        return Price(_table(arm).price_per_hour, "the loopback's fixed price")

    def creates(self, checked: object, arm: Arm) -> str:
        table = _table(arm)
        return f"a calibrate-server on {HOST} (TTFT {table.ttft}, ITL {table.itl})"

    def facts(self, arm: Arm) -> Facts:
        return Facts(kind="a loopback endpoint")

    def deployment(self, checked: object, arm: Arm, result: str) -> Deployment:
        folder = tempfile.mkdtemp(prefix=f"sagemeter-loopback-{result}-")
        return Deployment(
            result=result,
            arm=arm.name,
            platform=self.name,
            target=f"loopback {result}",
            instance_type=HOST,
            record=LoopbackRecord(folder=folder).model_dump(),
        )

    def deploy(self, checked: object, deployment: Deployment, hooks: Hooks) -> None:
        assert isinstance(checked, Checked)
        table = _table(checked.plan.arm_named(deployment.arm))
        record = LoopbackRecord.model_validate(deployment.record)
        port_file = Path(record.folder) / "port"
        command = [sys.executable, "-m", "sagemeter", "calibrate-server", "--port", "0",
                   "--port-file", str(port_file), "--ttft", table.ttft,
                   "--itl", table.itl]  # fmt: skip
        with (Path(record.folder) / "server.log").open("ab") as log:
            child = subprocess.Popen(  # its own session: it outlives a killed run, as a cloud's
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        _STARTED[child.pid] = child
        record.pid = child.pid
        deployment.record = record.model_dump()
        hooks.save()  # something now exists to find again
        deadline = time.monotonic() + table.startup_timeout
        while not (port_file.is_file() and port_file.read_text().strip()):
            if child.poll() is not None or time.monotonic() > deadline:
                raise PlatformError(f"the calibrate-server of {deployment.result} did not start")
            hooks.progress(f"{deployment.result}: starting the calibrate-server")
            time.sleep(0.05)
        record.url = f"http://{HOST}:{int(port_file.read_text())}/v1"
        while not _answers(record.url):
            if child.poll() is not None or time.monotonic() > deadline:
                raise PlatformError(f"{record.url} never answered /v1/models")
            time.sleep(0.05)
        deployment.record = record.model_dump()
        deployment.target = record.url
        deployment.hourly_usd = hooks.price_per_hour or table.price_per_hour
        deployment.price_note = "the loopback's fixed price"

    def adopt(self, checked: object, deployment: Deployment, hooks: Hooks) -> bool:
        record = LoopbackRecord.model_validate(deployment.record)
        return _is_ours(record.pid) and _answers(record.url)

    def delete(self, checked: object, deployment: Deployment, hooks: Hooks) -> None:
        record = LoopbackRecord.model_validate(deployment.record)
        pid = record.pid
        if pid is None or not _is_ours(pid):
            shutil.rmtree(record.folder, ignore_errors=True)
            hooks.deleted(f"{deployment.target}: nothing running")
            return
        hooks.note(f"stopping the calibrate-server {deployment.target} (pid {pid})")
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        while _is_ours(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _is_ours(pid):
            os.killpg(pid, signal.SIGKILL)
        child = _STARTED.pop(pid, None)
        if child is not None:
            child.wait(timeout=STOP_WAIT_S)
        shutil.rmtree(record.folder, ignore_errors=True)  # its port file and log go with it
        hooks.deleted(f"{deployment.target}: stopped (pid {pid})")

    def target(self, deployment: Deployment) -> Target:
        record = LoopbackRecord.model_validate(deployment.record)
        assert record.url is not None
        return OpenAITarget(record.url)

    def left_running(self, deployment: Deployment) -> str:
        pid = deployment.record.get("pid")
        return f"`kill {pid}`" if pid else f"stopping {deployment.target}"


LOOPBACK: Platform = LoopbackPlatform()
