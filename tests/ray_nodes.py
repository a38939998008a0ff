"""A real Ray cluster of two nodes on loopback, for the `--ray` tests: `ray start --head` plus a
worker node, each with its own CPU, each bound to 127.0.0.1.

Each node is `ray start --block` run as a child of the test process, so every process of a node
(GCS, raylet, agents, Ray's workers and the load generator's workers under them) descends from
one process id: a node is killed, like a machine losing power, by SIGKILL to that tree.

Ray turns a loopback `--node-ip-address` into the machine's outward address on Linux (it
expects nodes on different machines), which would make a node listen on every interface.
`node_main` starts the node with that one conversion switched off, so `--node-ip-address
127.0.0.1` is kept and the node binds loopback only. The driver (`sagemeter … --ray
127.0.0.1:PORT`) gets `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` for the same reason: without it,
Ray rewrites the loopback address it is given to the outward one, where nothing listens.

The cluster uses Ray's token authentication with a token of its own (a file in its folder,
named by RAY_AUTH_TOKEN_PATH for the nodes and the driver alike), so nothing is read from or
written to ~/.ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagemeter.engines.ports import free_port
from tests.busy_host import only_client_limits

START_TIMEOUT_S = 90.0
# 80 MB of object store per node: the runs pass a few MB of records.
OBJECT_STORE_BYTES = 80 * 1024 * 1024


def node_main() -> None:
    """`ray start …` with the loopback address kept (run as `python -m tests.ray_nodes`)."""
    import ray._private.services as services
    from ray.scripts.scripts import main

    services.resolve_ip_for_localhost = lambda host: host
    sys.argv = ["ray", *sys.argv[1:]]
    main()


def assert_valid_unless_client_bound(judged: dict[str, Any]) -> None:
    """`judged` (a result, a node, a level) is valid, or says only that the client fell behind."""
    reasons = judged["invalid_because"]
    assert judged["valid"] or only_client_limits(reasons), reasons


def ran_unless_client_bound(code: int, err: str, out: Path) -> dict[str, Any]:
    """The file of a `load` or `selfcheck` that exited 0, or 3 only because its own client fell
    behind (which it writes, then says on stderr). Any other exit or reason fails the test."""
    assert code in (0, 3), err
    data: dict[str, Any] = json.loads(out.read_text())
    if code == 3:
        judged = data.get("levels") or [data]
        assert "incomplete:" in err, err
        assert all(only_client_limits(item["invalid_because"]) for item in judged), err
    return data


@dataclass
class LoopbackCluster:
    """The two nodes: `address` is the head's GCS (HOST:PORT), `client_address` its Ray Client
    server (ray://HOST:PORT)."""

    address: str
    client_address: str
    folder: Path
    nodes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def auth(self) -> dict[str, str]:
        """Ray's token authentication, with this cluster's own token."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.folder / "token")}

    def driver_env(self, base: dict[str, str]) -> dict[str, str]:
        """The environment for a driver (the `sagemeter` command) joining this cluster."""
        return {
            **base,
            **self.auth,
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
        }

    def start_node(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """`ray start --block ARGS` (Ray's variables of the caller left out, `env` added);
        returns once the node is up."""
        log = open(self.folder / f"node-{len(self.nodes)}.log", "wb")  # noqa: SIM115
        command = [sys.executable, "-m", "tests.ray_nodes", "start", "--block", *args]
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env = {**inherited, **self.auth, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
        repo = Path(__file__).resolve().parents[1]
        node = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=repo)
        self.nodes.append(node)
        deadline = time.monotonic() + START_TIMEOUT_S
        while b"Ray runtime started" not in Path(log.name).read_bytes():
            if node.poll() is not None or time.monotonic() > deadline:
                text = Path(log.name).read_text(errors="replace")[-3000:]
                raise RuntimeError(f"a Ray node did not start: {text}")
            time.sleep(0.2)
        return node

    def kill_node(self, node: subprocess.Popen[bytes]) -> list[int]:
        """SIGKILL to the node's whole process tree at once (a machine losing power)."""
        pids = [node.pid, *descendants(node.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        node.wait(timeout=30)
        return pids

    def stop(self) -> None:
        """Stop the worker nodes, then the head (each tree first asked, then killed), and remove
        the cluster's folder."""
        self._stop_nodes()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _stop_nodes(self) -> None:
        for node in reversed(self.nodes):
            if node.poll() is not None:
                continue
            pids = [node.pid, *descendants(node.pid)]
            node.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(timeout=20)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if node.poll() is None:
                node.wait(timeout=10)


def start_loopback_cluster(worker_env: dict[str, str] | None = None) -> LoopbackCluster:
    """Head and one worker node (its environment plus `worker_env`), 1 CPU each, every server
    on 127.0.0.1."""
    folder = Path(tempfile.mkdtemp(prefix="smray-", dir="/tmp"))  # socket paths must stay short
    port, client_port = free_port(), free_port()
    cluster = LoopbackCluster(
        address=f"127.0.0.1:{port}", client_address=f"ray://127.0.0.1:{client_port}", folder=folder
    )
    token = folder / "token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    common = (
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--disable-usage-stats",
    )
    try:
        cluster.start_node(
            # The head's own children (Ray Client's per-client servers among them) keep the
            # loopback address too; only a worker node refuses this switch, hence `node_main`.
            "--head",
            f"--port={port}",
            f"--ray-client-server-port={client_port}",
            "--include-dashboard=false",
            f"--temp-dir={folder / 'ray'}",
            *common,
            env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
        )
        cluster.start_node(f"--address={cluster.address}", *common, env=worker_env)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    queue = [pid]
    while queue:
        below = children.get(queue.pop(0), [])
        found += below
        queue += below
    return found


def listening_addresses(pids: list[int]) -> set[str]:
    """The local addresses the given processes listen on (TCP, IPv4 and IPv6), from /proc."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    found: set[str] = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            found.add(_address(fields[1].split(":")[0], width))
    return found


def _address(hex_ip: str, width: int) -> str:
    """/proc/net/tcp's little-endian hex address as text."""
    raw = bytes.fromhex(hex_ip)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if width == 8:
        return socket.inet_ntop(socket.AF_INET, words)
    return socket.inet_ntop(socket.AF_INET6, words)


if __name__ == "__main__":
    node_main()
