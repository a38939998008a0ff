"""A GGUF checkpoint as a Hugging Face folder vLLM can serve: exact F32 weights, cached.

vLLM's CPU build does not run llama.cpp's quantized blocks, so `vllm:smollm2-f32` serves the
same weights as `local:smollm2-f32` from a Hugging Face folder (config, safetensors, tokenizer,
chat template) exported once from the GGUF file. The export runs in the vLLM environment
(`hf_export_script.py`, with its torch and transformers) and checks that every weight came
through bit for bit; the folder is cached beside the derived GGUF with the SHA-256 of its source
and of every file, checked on every use, so a corrupt or stale folder is exported again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sagemeter.atomic import write_json_atomic
from sagemeter.engines.checkpoints import Checkpoint, resolve_checkpoint
from sagemeter.engines.file_hashes import sha256_of
from sagemeter.engines.vllm_install import VllmInstall
from sagemeter.errors import UserError
from sagemeter.paths import cache_dir

SCRIPT = Path(__file__).with_name("hf_export_script.py")
EXPORT_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class ServedModel:
    """What `vllm serve` is given: a folder, the name it serves under, and the dtype to load."""

    name: str
    folder: Path
    dtype: str  # "float32" for exports (vLLM would downcast to bf16 otherwise), else "auto"
    description: str
    source: Checkpoint | None = None  # the GGUF it was exported from, when it was


def hf_dir() -> Path:
    path = cache_dir() / "checkpoints" / "hf"
    path.mkdir(parents=True, exist_ok=True)
    return path


def export_folder(source: Path) -> Path:
    return hf_dir() / source.name.removesuffix(".gguf")


def _sidecar(folder: Path) -> Path:
    return folder.with_name(folder.name + ".json")


def check_vllm_checkpoint(spec: str) -> None:
    """Fail before any work on a checkpoint vLLM cannot be given (without exporting anything)."""
    _plan(spec, derive=False)


def planned_model(spec: str) -> ServedModel:
    """What `vllm:SPEC` would serve, found without deriving or exporting anything."""
    return _plan(spec, derive=False)


def current_export(model: ServedModel) -> Path | None:
    """The model's exported folder when it is made and unchanged since; None otherwise."""
    if model.source is None or not model.source.path.is_file():
        return None
    return model.folder if _recorded_export(model.folder, model.source.path) else None


def served_model(spec: str, install: VllmInstall) -> ServedModel:
    """The folder to serve for `vllm:SPEC`, exporting (once) from a GGUF file when needed."""
    planned = _plan(spec, derive=True)
    if planned.source is None:
        return planned
    folder = ensure_export(planned.source.path, install)
    return ServedModel(planned.name, folder, "float32", planned.description, planned.source)


def _plan(spec: str, *, derive: bool) -> ServedModel:
    if spec == "smollm2-q4_1":
        raise UserError(
            "vllm:smollm2-q4_1: vLLM does not run llama.cpp's 4-bit blocks; "
            "vllm:smollm2-f32 serves the same weights stored at 32 bits"
        )
    path = Path(spec).expanduser()
    if spec != "smollm2-f32" and path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(
                f"vllm:{spec}: the folder has no config.json (not a Hugging Face model)"
            )
        return ServedModel(path.name, path.resolve(), "auto", "a Hugging Face folder of your own")
    try:
        checkpoint = resolve_checkpoint(spec, derive=derive)
    except UserError as exc:
        raise UserError(
            f"vllm:{spec}: {exc}; vllm: also takes a Hugging Face model folder"
        ) from None
    description = f"{checkpoint.description}, exported to a Hugging Face folder (F32)"
    return ServedModel(
        checkpoint.name, export_folder(checkpoint.path), "float32", description, checkpoint
    )


def _recorded_export(folder: Path, source: Path) -> dict[str, object] | None:
    """The sidecar of a complete, unchanged export of `source`; None otherwise."""
    sidecar = _sidecar(folder)
    if not (folder.is_dir() and sidecar.is_file()):
        return None
    try:
        record = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    files = record.get("files")
    if record.get("source_sha256") != sha256_of(source) or not isinstance(files, dict):
        return None
    present = sorted(p.name for p in folder.iterdir() if p.is_file())
    if present != sorted(files):
        return None
    if any(sha256_of(folder / name) != digest for name, digest in files.items()):
        return None
    return dict(record)


def ensure_export(source: Path, install: VllmInstall) -> Path:
    """The exported folder of `source`, made on first use and checked against its record."""
    folder = export_folder(source)
    if _recorded_export(folder, source) is not None:
        return folder
    part = folder.with_name(f".{folder.name}.{os.getpid()}.part")
    shutil.rmtree(part, ignore_errors=True)
    try:
        summary = _run_export(source, part, install)
        if not summary.get("exact"):
            raise UserError(
                f"exporting {source.name}: {summary.get('inexact_tensors')} tensors did not come "
                "through bit for bit; not serving them"
            )
        shutil.rmtree(folder, ignore_errors=True)
        _sidecar(folder).unlink(missing_ok=True)
        os.replace(part, folder)
    finally:
        shutil.rmtree(part, ignore_errors=True)
    record_export(folder, source, summary)
    return folder


def record_export(folder: Path, source: Path, summary: dict[str, object]) -> None:
    """Write the sidecar that makes `folder` the checked export of `source` (its checksums)."""
    files = {p.name: sha256_of(p) for p in sorted(folder.iterdir()) if p.is_file()}
    write_json_atomic(
        _sidecar(folder),
        {
            "source": source.name,
            "source_sha256": sha256_of(source),
            "tensors": summary.get("tensors"),
            "parameters": summary.get("parameters"),
            "exact": True,
            "files": files,
        },
    )


def export_record(folder: Path) -> dict[str, object] | None:
    """The export's sidecar (source, checksums), for the result's environment."""
    try:
        return dict(json.loads(_sidecar(folder).read_text()))
    except (OSError, ValueError):
        return None


def _run_export(source: Path, out: Path, install: VllmInstall) -> dict[str, object]:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    try:
        completed = subprocess.run(
            [str(install.python), str(SCRIPT), str(source), str(out)],
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT_S,
            env=environment,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"exporting {source.name} took over {EXPORT_TIMEOUT_S:.0f} s") from None
    if completed.returncode != 0:
        lines = [line for line in completed.stderr.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit {completed.returncode}"
        raise UserError(
            f"exporting {source.name} to a Hugging Face folder failed with {install.python}: "
            f"{last} (the environment needs torch, transformers, gguf and accelerate)"
        )
    try:
        summary = json.loads(completed.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UserError(f"exporting {source.name}: the export printed no summary") from None
    return dict(summary)
