"""Headless Chromium over its DevTools pipe: open a local page, measure its layout, screenshot it.

`--remote-debugging-pipe` speaks the DevTools protocol on file descriptors 3 (commands in) and 4
(replies out), each message JSON ended by a NUL byte: no port, no network, no extra package.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> str:
    """The browser, or a failure that says how to get it (never a skip)."""
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if not found:
        raise AssertionError(
            "headless Chromium (/usr/bin/chromium) is missing; `.ci/run` installs it "
            "(apt-get update && apt-get install -y chromium)"
        )
    return found


class Browser:
    """One Chromium process and one page, driven through the DevTools pipe."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="sagemeter-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child needs the read end of our commands as fd 3 and the write end of replies as 4.
        self._process = subprocess.Popen(
            [
                chromium_path(),
                *FLAGS,
                f"--user-data-dir={self._profile.name}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # our own fds are close-on-exec anyway; 3 and 4 are set up below
            preexec_fn=_dup_to(to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable", session=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the browser may be gone; it is killed below anyway
            self.call("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its reply; a protocol error fails loudly."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._events.append(reply)

    def wait_for_event(self, method: str) -> dict[str, Any]:
        for index, event in enumerate(self._events):
            if event.get("method") == method:
                return self._events.pop(index)
        while True:
            event = self._read()
            if event.get("method") == method:
                return event
            self._events.append(event)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"Chromium did not answer within {self.timeout:.0f} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise AssertionError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def open(self, path: Path, width: int, height: int, mobile: bool = False) -> None:
        """Load a local file at a given viewport and wait until it (and its images) loaded."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=mobile,
        )
        self.call("Page.navigate", session=True, url=path.resolve().as_uri())
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        reply = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in reply:
            raise AssertionError(f"page script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, out: Path) -> bytes:
        """A PNG of the whole page (beyond the viewport), also written to `out`."""
        data = base64.b64decode(
            self.call(
                "Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True
            )["data"]
        )
        out.write_bytes(data)
        return data


def _dup_to(commands_in: int, replies_out: int) -> Any:
    def arrange() -> None:
        # Move both ends above 9 first, so that placing one at 3 or 4 cannot clobber the other.
        high_in = fcntl.fcntl(commands_in, fcntl.F_DUPFD, 10)
        high_out = fcntl.fcntl(replies_out, fcntl.F_DUPFD, 10)
        os.dup2(high_in, 3)
        os.dup2(high_out, 4)

    return arrange
