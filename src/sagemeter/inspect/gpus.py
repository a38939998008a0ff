"""Memory bandwidth of the GPUs LLMs are served on, each from its maker's data sheet.

Peak figures: a real kernel streams weights at some 70-90% of them, which is one reason measured
decode stays below the ceiling. SageMaker instance families are listed so `--gpu ml.g6.xlarge`
works too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sagemeter.errors import UserError


@dataclass(frozen=True)
class GpuBandwidth:
    name: str
    gb_per_s: float
    memory: str
    sagemaker_families: tuple[str, ...]
    source: str


GPUS = (
    GpuBandwidth(
        "L4", 300, "24 GB GDDR6", ("ml.g6",), "https://www.nvidia.com/en-us/data-center/l4/"
    ),
    GpuBandwidth(
        "T4", 320, "16 GB GDDR6", ("ml.g4dn",), "https://www.nvidia.com/en-us/data-center/tesla-t4/"
    ),
    GpuBandwidth(
        "A10G",
        600,
        "24 GB GDDR6",
        ("ml.g5",),
        "https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (A10G: AWS's A10)",
    ),
    GpuBandwidth(
        "L40S", 864, "48 GB GDDR6", ("ml.g6e",), "https://www.nvidia.com/en-us/data-center/l40s/"
    ),
    GpuBandwidth(
        "A100",
        1555,
        "40 GB HBM2 (SXM)",
        ("ml.p4d",),
        "https://www.nvidia.com/en-us/data-center/a100/",
    ),
    GpuBandwidth(
        "A100-80GB",
        2039,
        "80 GB HBM2e (SXM)",
        ("ml.p4de",),
        "https://www.nvidia.com/en-us/data-center/a100/",
    ),
    GpuBandwidth(
        "H100",
        3350,
        "80 GB HBM3 (SXM)",
        ("ml.p5",),
        "https://www.nvidia.com/en-us/data-center/h100/",
    ),
    GpuBandwidth(
        "H200",
        4800,
        "141 GB HBM3e",
        ("ml.p5e", "ml.p5en"),
        "https://www.nvidia.com/en-us/data-center/h200/",
    ),
    GpuBandwidth(
        "MI300X",
        5300,
        "192 GB HBM3",
        (),
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
    ),
)


@dataclass(frozen=True)
class Bandwidth:
    """The bandwidth a ceiling is computed with: a named GPU's, or one the user gave."""

    gb_per_s: float
    gpu: str | None
    source: str


def known_gpus() -> str:
    return ", ".join(f"{gpu.name} ({gpu.gb_per_s:g} GB/s)" for gpu in GPUS)


def find_gpu(name: str) -> GpuBandwidth:
    """A GPU by name (L4, nvidia-h100, …) or by SageMaker instance type (ml.g6.xlarge)."""
    key = name.strip().lower()
    for prefix in ("nvidia ", "nvidia-", "amd ", "amd-"):
        key = key.removeprefix(prefix)
    for gpu in GPUS:
        if key == gpu.name.lower():
            return gpu
    family = ".".join(key.split(".")[:2]) if key.startswith("ml.") else f"ml.{key.split('.')[0]}"
    for gpu in GPUS:
        if family in gpu.sagemaker_families:
            return gpu
    raise UserError(
        f"--gpu {name!r} is not in the table; known: {known_gpus()}; or give --bandwidth"
    )


def check_bandwidth(bandwidth_gb_s: float, label: str = "--bandwidth") -> None:
    """A memory bandwidth is a positive, finite number of GB/s."""
    if not (bandwidth_gb_s > 0 and math.isfinite(bandwidth_gb_s)):
        raise UserError(f"{label} {bandwidth_gb_s:g}: give a positive number of GB/s")


def bandwidth_for(gpu: str | None, bandwidth_gb_s: float | None) -> Bandwidth | None:
    """The bandwidth to use, checked before any header is read; None when neither is given."""
    if gpu is not None and bandwidth_gb_s is not None:
        raise UserError("give --gpu or --bandwidth, not both")
    if bandwidth_gb_s is not None:
        check_bandwidth(bandwidth_gb_s)
        return Bandwidth(bandwidth_gb_s, None, "given with --bandwidth")
    if gpu is None:
        return None
    found = find_gpu(gpu)
    return Bandwidth(found.gb_per_s, found.name, f"{found.name} data sheet: {found.source}")
