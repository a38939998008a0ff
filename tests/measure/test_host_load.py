"""A busy measuring host is detected and named: /proc parsed from written text (the sampler's /proc
root is a parameter), one real sample, and a busy result's warning in combine and the report."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from sagemeter.compare import combine
from sagemeter.measure.host_load import HostSampler, parse_loadavg, parse_stat
from sagemeter.report.writer import write_report
from sagemeter.results import load_result
from tests.report_parse import FIXED_RUN, copy_run, md_sections

# cpu user nice system idle iowait irq softirq steal guest guest_nice
STAT = """cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0
cpu0 1 0 1 1 0 0 0 0 0 0
intr 12345
"""


def _write(proc: Path, load: float, user: int, idle: int, steal: int = 0) -> None:
    (proc / "loadavg").write_text(f"{load} 1.00 0.50 2/100 4242\n")
    (proc / "stat").write_text(STAT.format(user=user, system=0, idle=idle, steal=steal))


def test_the_stat_and_loadavg_lines_are_read() -> None:
    times = parse_stat(STAT.format(user=600, system=100, idle=250, steal=50))
    assert times is not None
    assert (times.total, times.busy, times.steal) == (1000, 700, 50)
    assert parse_stat("intr 1 2 3\n") is None
    assert parse_stat("cpu  a b c\n") is None
    assert parse_loadavg("5.20 3.10 2.00 3/120 999\n") == 5.2
    assert parse_loadavg("") is None


def test_a_high_load_average_before_and_steal_make_a_busy_host(tmp_path: Path) -> None:
    _write(tmp_path, load=5.2, user=100, idle=100)
    sampler = HostSampler(tmp_path, cores=2)
    sampler.start()
    sampler.begin("decode")
    _write(tmp_path, load=4.0, user=150, idle=130, steal=20)  # 50 busy, 30 idle, 20 stolen
    sampler.end()
    host = sampler.record(server_here=True)
    assert host.cores == 2 and host.load_average_before == 5.2
    assert host.load_average_during == 4.0
    assert host.steal_share == pytest.approx(0.2)
    (phase,) = host.phases
    assert phase.phase == "decode" and phase.busy_share == pytest.approx(0.5)
    assert host.busy is True
    assert host.busy_because == [
        "load average 5.2 on 2 cores before measuring",
        "CPU steal 20% during a phase",
    ]
    note = host.busy_note()
    assert note is not None and note.startswith("measured on a busy host (load average 5.2 on 2")


def test_other_processes_count_only_when_the_server_is_elsewhere(tmp_path: Path) -> None:
    _write(tmp_path, load=0.5, user=0, idle=1000)
    sampler = HostSampler(tmp_path, cores=2)
    sampler.start()
    sampler.begin("parallel")
    time.sleep(0.2)  # a phase long enough that this test's own CPU is a small share of it
    _write(tmp_path, load=1.5, user=900, idle=1100)  # 90 % of all cores busy, not by us
    sampler.end()
    remote = sampler.record(server_here=False)
    assert remote.busy is True
    found = re.fullmatch(
        r"other processes kept (\d+)% of 2 cores busy during parallel", remote.busy_because[0]
    )
    assert found is not None and 70 <= int(found.group(1)) <= 90  # 90 % less this test's own
    here = sampler.record(server_here=True)  # the busy cores may be the measured server's own
    assert here.busy is False and here.busy_note() is None


def test_without_proc_only_the_clients_share_is_known(tmp_path: Path) -> None:
    sampler = HostSampler(tmp_path / "absent", cores=4)
    sampler.start()
    sampler.begin("decode")
    sampler.end()
    host = sampler.record(server_here=False)
    assert host.load_average_before is None and host.steal_share is None
    assert host.phases[0].busy_share is None and host.busy is False


def test_the_real_host_gives_sane_values() -> None:
    sampler = HostSampler()
    sampler.start()
    sampler.begin("decode")
    spin_until = time.process_time() + 0.05
    while time.process_time() < spin_until:  # 50 ms of CPU of our own, however busy the host
        pass
    sampler.end()
    host = sampler.record(server_here=True)
    assert host.cores >= 1
    assert host.load_average_before is not None and host.load_average_before >= 0
    (phase,) = host.phases
    assert phase.seconds > 0
    assert phase.busy_share is not None and 0 <= phase.busy_share <= 1
    assert 0 < phase.client_share <= 1
    assert host.busy == bool(host.busy_because)


def _busy(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["detail"]["host"] = {
        "cores": 2,
        "load_average_before": 5.2,
        "busy": True,
        "busy_because": ["load average 5.2 on 2 cores before measuring"],
    }
    path.write_text(json.dumps(data), encoding="utf-8")


def test_a_busy_result_is_named_in_combine_and_the_report(tmp_path: Path) -> None:
    run = copy_run(FIXED_RUN, tmp_path / "run")
    busy = run / "measure-smollm2-q4_1.json"
    _busy(busy)
    names = ["measure-smollm2-f32.json", busy.name, "measure-smollm2-f32-again.json"]
    assert load_result(run / names[0]).detail.host is None  # type: ignore[union-attr]  # old file
    comparison = combine([run / name for name in names])
    notes = [w for w in comparison.warnings if "busy host" in w]
    assert notes == [
        "measure-smollm2-q4_1.json: measured on a busy host (load average 5.2 on 2 cores before "
        "measuring): its speed figures may be slower than the server can give"
    ]
    write_report(run, "md")
    sections = md_sections((run / "report.md").read_text(encoding="utf-8"))
    assert "smollm2-q4_1: measured on a busy host (load average 5.2" in sections["Decode speed"]
    compared = sections["What was compared"]
    assert "busy: load average 5.2 on 2 cores before measuring" in compared
    assert "smollm2-f32" in compared and "n/a" in compared


def test_the_measure_summary_gives_a_busy_host_one_warning_line(tmp_path: Path) -> None:
    from rich.console import Console

    from sagemeter.report.terminal import print_result

    path = tmp_path / "measure-busy.json"
    path.write_text((FIXED_RUN / "measure-smollm2-q4_1.json").read_text(), encoding="utf-8")
    _busy(path)
    console = Console(record=True, width=200)
    print_result(console, load_result(path))
    lines = [line for line in console.export_text().splitlines() if "busy host" in line]
    assert lines == [
        "warning: measured on a busy host (load average 5.2 on 2 cores before measuring): its "
        "speed figures may be slower than the server can give"
    ]


def test_the_mcp_measure_answer_names_a_busy_host(tmp_path: Path) -> None:
    from sagemeter.mcp.measure_tools import measure_text

    path = tmp_path / "measure-busy.json"
    path.write_text((FIXED_RUN / "measure-smollm2-q4_1.json").read_text(), encoding="utf-8")
    _busy(path)
    text = measure_text(load_result(path), path)
    assert "measured on a busy host (load average 5.2 on 2 cores before measuring)" in text
