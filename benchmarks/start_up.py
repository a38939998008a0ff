"""What sagemeter pays before it measures anything: parsing a GGUF and starting its processes.

A local measurement parses its checkpoint's GGUF (size, facts, tokenizer, vocabulary), and every
`measure` or `load` starts new Python processes: the batch workers, the truth server in tests,
the command itself. On a slow two-core host these costs are seconds, so they are measured here as
CPU seconds (what a busy host pays), medians over repeats taken in one run:

- the shipped 4-bit checkpoint's parse, by the `gguf` package's own reader and by
  `sagemeter.gguf_open.read_gguf` (the same reader over a plain array), alternated, with their
  ratio;
- the CPU a fresh interpreter spends importing each process's module;
- a SageMaker client from a new AWS session, as the MCP server makes one per tool call: from a
  plain boto3 session (botocore parses the service's model again) and from
  `sagemeter.transport.aws_session.new_session` (parsed once per process), alternated.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from typing import Any

REPEATS = 5
# What each process imports first: a load's batch worker, the known-truth server, the embedded
# engine's worker, and the command itself as `measure` and `load` register it.
PROCESSES = {
    "batch worker (sagemeter.transport.worker)": "import sagemeter.transport.worker",
    "truth server (sagemeter.calibrate.server)": "import sagemeter.calibrate.server",
    "engine worker (sagemeter.engines.llamacpp_worker)": "import sagemeter.engines.llamacpp_worker",
    "`sagemeter measure` command": "import sagemeter.cli.measure",
    "`sagemeter load` command": "import sagemeter.cli.load",
}


def _parse_cpu_s(parse: Any, path: str) -> float:
    began = time.process_time()
    reader = parse(path)
    spent = time.process_time() - began
    assert len(reader.tensors) > 0
    return spent


def _gguf_parses() -> dict[str, Any]:
    from gguf import GGUFReader

    from sagemeter.engines.checkpoints import resolve_checkpoint
    from sagemeter.gguf_open import read_gguf

    path = str(resolve_checkpoint("smollm2-q4_1").path)
    package: list[float] = []
    plain: list[float] = []
    for _ in range(REPEATS):  # alternated, so a slower minute of the host hits both
        package.append(_parse_cpu_s(GGUFReader, path))
        plain.append(_parse_cpu_s(read_gguf, path))
    return {
        "file": "SmolLM2-135M-Instruct Q4_1 (the shipped checkpoint)",
        "repeats": REPEATS,
        "package_reader_cpu_s": statistics.median(package),
        "read_gguf_cpu_s": statistics.median(plain),
        "ratio": statistics.median(package) / statistics.median(plain),
    }


def _client_cpu_s(make_session: Any) -> float:
    began = time.process_time()
    client = make_session().client("sagemaker", region_name="us-east-2")
    spent = time.process_time() - began
    assert client.meta.service_model.service_name == "sagemaker"
    return spent


def _aws_clients() -> dict[str, Any]:
    import boto3.session

    from sagemeter.transport.aws_session import new_session

    _client_cpu_s(new_session)  # the process's one parse, not in a figure
    plain: list[float] = []
    shared: list[float] = []
    for _ in range(REPEATS):
        plain.append(_client_cpu_s(boto3.session.Session))
        shared.append(_client_cpu_s(new_session))
    return {
        "repeats": REPEATS,
        "plain_session_cpu_s": statistics.median(plain),
        "new_session_cpu_s": statistics.median(shared),
        "ratio": statistics.median(plain) / statistics.median(shared),
    }


def _import_cpu_s(statement: str) -> float:
    """The CPU a new interpreter spends on `statement` and its own start, as the child's rusage."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", statement], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run() -> dict[str, Any]:
    _import_cpu_s("import sagemeter.cli.measure")  # bytecode written once, not in a figure
    processes = {
        name: statistics.median(_import_cpu_s(statement) for _ in range(REPEATS))
        for name, statement in PROCESSES.items()
    }
    return {
        "gguf_parse": _gguf_parses(),
        "bare_interpreter_cpu_s": statistics.median(_import_cpu_s("pass") for _ in range(REPEATS)),
        "process_import_cpu_s": processes,
        "aws_client": _aws_clients(),
    }


def to_markdown(result: dict[str, Any]) -> str:
    parse = result["gguf_parse"]
    lines = [
        "# Start-up: a GGUF parse and a new process's imports (CPU seconds)",
        "",
        f"Medians of {parse['repeats']} repeats in one run; CPU time, which is what a busy host "
        "pays.",
        "",
        f"## Parsing {parse['file']}",
        "",
        "| reader | CPU s |",
        "| --- | ---: |",
        f"| the `gguf` package's `GGUFReader` | {parse['package_reader_cpu_s']:.2f} |",
        f"| `sagemeter.gguf_open.read_gguf` (plain array) | {parse['read_gguf_cpu_s']:.2f} |",
        "",
        f"`read_gguf` is {parse['ratio']:.1f}× faster.",
        "",
        "## A new interpreter importing what each process needs",
        "",
        f"A bare interpreter: {result['bare_interpreter_cpu_s']:.3f} CPU s.",
        "",
        "| process | CPU s |",
        "| --- | ---: |",
    ]
    for name, seconds in result["process_import_cpu_s"].items():
        lines.append(f"| {name} | {seconds:.3f} |")
    aws = result["aws_client"]
    lines += [
        "",
        "## A SageMaker client from a new AWS session (the MCP server makes one a tool call)",
        "",
        "| session | CPU s |",
        "| --- | ---: |",
        f"| `boto3.session.Session()` (parses it again) | {aws['plain_session_cpu_s']:.3f} |",
        f"| `sagemeter.transport.aws_session.new_session()` | {aws['new_session_cpu_s']:.3f} |",
        "",
        f"A shared parse makes a new session's client {aws['ratio']:.1f}× cheaper.",
    ]
    return "\n".join(lines) + "\n"
