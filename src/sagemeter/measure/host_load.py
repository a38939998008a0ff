"""Is the measuring host busy? Load average, CPU steal and the client's own share, sampled cheaply.

A figure measured on a busy host is still a figure, but a slower one than the server can give:
the client's clock reads late, its workers wait for a core. So the host is sampled before the
measurement and at each phase's start and end (no thread: a few file reads each time), and the
result names a busy host. Busy means any of:

- the 1-minute load average before measuring exceeds the cores (`load average 5.2 on 2 cores`);
- CPU steal over the measurement exceeds STEAL_BUSY (5 %): a virtual machine whose hypervisor
  gave its cores to someone else;
- other processes (neither this client nor, when it runs here, the server measured) kept more
  than OTHERS_BUSY (50 %) of all cores busy during a phase.

`/proc` is a parameter so the parsing is tested on written text; on a host without it (macOS)
only the client's own share is known and nothing is judged from the rest.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from sagemeter.results.model import HostLoad, HostPhase

STEAL_BUSY = 0.05
OTHERS_BUSY = 0.5


@dataclass(frozen=True)
class CpuTimes:
    """The `cpu` line of /proc/stat, in clock ticks: all time, busy time and stolen time."""

    total: int
    busy: int
    steal: int


def parse_stat(text: str) -> CpuTimes | None:
    """The all-cores line (`cpu  user nice system idle iowait irq softirq steal …`)."""
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] != "cpu":
            continue
        try:
            ticks = [int(value) for value in parts[1:9]]
        except ValueError:
            return None
        ticks += [0] * (8 - len(ticks))
        idle = ticks[3] + ticks[4]  # idle and iowait
        # guest time is already counted in user: fields 9 and 10 are left out.
        total = sum(ticks)
        return CpuTimes(total=total, busy=total - idle - ticks[7], steal=ticks[7])
    return None


def parse_loadavg(text: str) -> float | None:
    """The 1-minute load average (the first field of /proc/loadavg)."""
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Sample:
    """One instant: wall clock, load average, the host's CPU ticks and this process's CPU."""

    wall: float
    load: float | None
    cpu: CpuTimes | None
    own_cpu_s: float


class HostSampler:
    """Samples at the start and at each phase's start and end; judges and records the host."""

    def __init__(self, proc: Path = Path("/proc"), cores: int | None = None) -> None:
        self.proc = proc
        self.cores = cores or os.cpu_count() or 1
        self.before: Sample | None = None
        self.phases: list[HostPhase] = []
        self._open: tuple[str, Sample] | None = None

    def _read(self, name: str) -> str | None:
        try:
            return (self.proc / name).read_text(encoding="ascii", errors="replace")
        except OSError:
            return None

    def sample(self) -> Sample:
        stat, loadavg = self._read("stat"), self._read("loadavg")
        times = os.times()
        return Sample(
            wall=time.monotonic(),
            load=parse_loadavg(loadavg) if loadavg is not None else None,
            cpu=parse_stat(stat) if stat is not None else None,
            # process_time() counts in nanoseconds (os.times() in 10 ms ticks, which reads a
            # short phase's own CPU as none); children's times are known only in ticks.
            own_cpu_s=time.process_time() + times.children_user + times.children_system,
        )

    def start(self) -> None:
        """The host before measuring."""
        self.before = self.sample()

    def begin(self, phase: str) -> None:
        self._open = (phase, self.sample())

    def end(self) -> None:
        """Close the open phase: its shares of all cores (busy, stolen, this client's)."""
        if self._open is None:
            return
        phase, first = self._open
        self._open = None
        self.phases.append(phase_between(phase, first, self.sample(), self.cores))

    def record(self, server_here: bool) -> HostLoad:
        """The `host` block, with the verdict; `server_here`: the measured server shares this
        host, so its CPU is not counted as other processes'."""
        loads = [p.load_average for p in self.phases if p.load_average is not None]
        steal = [p.steal_share for p in self.phases if p.steal_share is not None]
        own = [p.client_share for p in self.phases]
        host = HostLoad(
            cores=self.cores,
            load_average_before=self.before.load if self.before else None,
            load_average_during=max(loads) if loads else None,
            steal_share=max(steal) if steal else None,
            client_share=max(own) if own else None,
            server_here=server_here,
            phases=self.phases,
        )
        reasons = busy_reasons(host)
        host.busy = bool(reasons)
        host.busy_because = reasons
        return host


def phase_between(phase: str, first: Sample, last: Sample, cores: int) -> HostPhase:
    """One phase's shares of all cores, from two samples."""
    wall = max(last.wall - first.wall, 1e-9)
    client = (last.own_cpu_s - first.own_cpu_s) / (wall * cores)
    busy = steal = None
    if first.cpu is not None and last.cpu is not None and last.cpu.total > first.cpu.total:
        ticks = last.cpu.total - first.cpu.total
        busy = (last.cpu.busy - first.cpu.busy) / ticks
        steal = (last.cpu.steal - first.cpu.steal) / ticks
    return HostPhase(
        phase=phase,
        seconds=round(wall, 3),
        load_average=last.load,
        busy_share=_share(busy),
        steal_share=_share(steal),
        client_share=_share(client) or 0.0,
    )


def _share(value: float | None) -> float | None:
    return None if value is None else round(min(max(value, 0.0), 1.0), 4)


def busy_reasons(host: HostLoad) -> list[str]:
    """Each reason the host counts as busy (the module docstring's thresholds)."""
    reasons = []
    before = host.load_average_before
    if before is not None and before > host.cores:
        reasons.append(f"load average {before:.1f} on {host.cores} cores before measuring")
    if host.steal_share is not None and host.steal_share > STEAL_BUSY:
        reasons.append(f"CPU steal {host.steal_share:.0%} during a phase")
    if not host.server_here:
        for phase in host.phases:
            if phase.busy_share is None:
                continue
            others = phase.busy_share - phase.client_share
            if others > OTHERS_BUSY:
                reasons.append(
                    f"other processes kept {others:.0%} of {host.cores} cores busy during "
                    f"{phase.phase}"
                )
                break
    return reasons
