"""SageMaker real-time GPU instance types: which GPU, how many, their memory and bandwidth.

GPU counts are AWS's instance pages (https://aws.amazon.com/sagemaker/pricing/ and the EC2 pages
of g4dn, g5, g6, g6e, p4d, p5); each GPU's memory and bandwidth are its maker's data sheet, kept
in `inspect.gpus` beside the decode ceiling that uses them. The sizes of one family share the GPU
and differ in vCPUs, host memory and price.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagemeter.inspect.gpus import GpuBandwidth, find_gpu

ONE_GPU = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1}
# (family, GPU, {size: GPU count})
_FAMILIES: tuple[tuple[str, str, dict[str, int]], ...] = (
    ("ml.g4dn", "T4", {**ONE_GPU, "12xlarge": 4}),
    ("ml.g5", "A10G", {**ONE_GPU, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    ("ml.g6", "L4", {**ONE_GPU, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    ("ml.g6e", "L40S", {**ONE_GPU, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    ("ml.p4d", "A100", {"24xlarge": 8}),
    ("ml.p4de", "A100-80GB", {"24xlarge": 8}),
    ("ml.p5", "H100", {"48xlarge": 8}),
)


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpu: GpuBandwidth
    gpus: int

    @property
    def gpu_memory_gb(self) -> float:
        """One GPU's memory in GB, as its data sheet states it ("24 GB GDDR6")."""
        return float(self.gpu.memory.split()[0])

    @property
    def memory_bytes(self) -> float:
        return self.gpus * self.gpu_memory_gb * 1e9

    @property
    def bandwidth_gb_s(self) -> float:
        """Every GPU's bandwidth together: what tensor parallelism over all of them can read."""
        return self.gpus * self.gpu.gb_per_s


GPU_INSTANCE_TYPES: tuple[InstanceType, ...] = tuple(
    InstanceType(f"{family}.{size}", find_gpu(gpu), count)
    for family, gpu, sizes in _FAMILIES
    for size, count in sizes.items()
)
