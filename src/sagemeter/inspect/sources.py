"""What `inspect` accepts as a SOURCE, checked before anything is read, and how each is opened.

PATH.safetensors | FOLDER   local safetensors (a folder may be sharded with an index)
PATH.gguf                   a GGUF file (llama.cpp)
local:CHECKPOINT            an embedded-engine checkpoint (a name or a .gguf path)
vllm:CHECKPOINT             what `vllm serve` would load: a packaged checkpoint's Hugging Face
                            export (its GGUF until the export is made), a .gguf file or a folder
                            on this machine, or ORG/NAME on the Hub
hf:ORG/NAME[@REVISION]      a Hub model, its headers read by range requests
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagemeter.engines.checkpoints import CHECKPOINT_NAMES, resolve_checkpoint
from sagemeter.engines.hf_export import current_export, planned_model
from sagemeter.errors import UserError
from sagemeter.inspect.gguf_file import read_gguf
from sagemeter.inspect.hub import REPO_ID, HubSource, parse_hub_source, read_hub
from sagemeter.inspect.safetensors_files import read_safetensors, shard_names
from sagemeter.inspect.table import TensorTable

ACCEPTED = (
    "a .safetensors file or folder, a .gguf file, local:CHECKPOINT, vllm:CHECKPOINT or "
    "hf:ORG/NAME[@REVISION]"
)


@dataclass(frozen=True)
class LocalSource:
    """Files on this machine: one GGUF file, or the safetensors files of one checkpoint."""

    format: str
    paths: tuple[Path, ...]
    folder: Path
    notes: tuple[str, ...] = ()  # what was read in the source's place, and why


@dataclass(frozen=True)
class Source:
    text: str
    where: LocalSource | HubSource


def parse_source(text: str) -> Source:
    """One SOURCE, checked (files exist, names are well formed) before any header is read."""
    raw = text.strip()
    if raw.startswith("hf:"):
        return Source(raw, parse_hub_source(raw))
    if raw.startswith("local:"):
        return Source(raw, _local_checkpoint(raw.removeprefix("local:").strip(), raw))
    if raw.startswith("vllm:"):
        name = raw.removeprefix("vllm:").strip()
        if name in CHECKPOINT_NAMES or name.endswith(".gguf"):
            return Source(raw, _vllm_export(name, raw))
        if Path(name).expanduser().exists():
            return Source(raw, _local_path(Path(name).expanduser(), raw))
        if REPO_ID.match(name.partition("@")[0]):
            return Source(raw, parse_hub_source(f"hf:{name}"))
        raise UserError(
            f"{text!r}: give vllm: smollm2-f32, a .gguf file, a local checkpoint folder "
            "or a Hub ORG/NAME"
        )
    if not raw:
        raise UserError(f"an empty source; give {ACCEPTED}")
    path = Path(raw).expanduser()
    if not path.exists():
        raise UserError(f"{text!r}: no such file or folder; give {ACCEPTED}")
    return Source(raw, _local_path(path, raw))


def _local_checkpoint(name: str, text: str) -> LocalSource:
    if not name:
        raise UserError(f"{text!r} names no checkpoint")
    checkpoint = resolve_checkpoint(name, derive=False)
    if not checkpoint.path.is_file():
        raise UserError(
            f"{text}: the checkpoint is not derived yet; run `sagemeter checkpoints --prepare`"
        )
    return LocalSource("gguf", (checkpoint.path,), checkpoint.path.parent)


def _vllm_export(name: str, text: str) -> LocalSource:
    """The Hugging Face export `vllm:` serves of a GGUF; for the packaged F32 checkpoint, the
    GGUF itself until the export is made.

    Nothing is derived, exported or downloaded. The export stores every weight at 32 bits
    (checked bit for bit when it is made), so until then the packaged F32 GGUF's tensor table is
    the export's. A GGUF of the user's may be stored otherwise: it is refused until its export
    exists rather than shown as what vLLM reads.
    """
    model = planned_model(name)
    source = model.source
    if source is None:  # a folder that happens to end in .gguf
        return _local_path(model.folder, text)
    if not source.path.is_file():
        raise UserError(
            f"{text}: vLLM serves an export of local:{name}, which is not derived yet; "
            "run `sagemeter checkpoints --prepare`"
        )
    folder = current_export(model)
    if folder is not None:
        read = _local_path(folder, text)
        note = f"the Hugging Face export vLLM serves, made from {source.path.name}"
        return LocalSource(read.format, read.paths, read.folder, (note,))
    if name not in CHECKPOINT_NAMES:
        raise UserError(
            f"{text}: vLLM serves a 32-bit Hugging Face export of this file, not made yet (the "
            f"first run of the target makes it); `inspect {source.path}` reads the file as stored"
        )
    note = (
        f"read from {source.path.name}: vLLM serves a Hugging Face export of it (the same "
        "weights, F32), not made yet; the first run of this target makes it"
    )
    return LocalSource("gguf", (source.path,), source.path.parent, (note,))


def _local_path(path: Path, text: str) -> LocalSource:
    if path.is_file():
        if path.suffix == ".gguf":
            return LocalSource("gguf", (path,), path.parent)
        if path.suffix == ".safetensors":
            return LocalSource("safetensors", (path,), path.parent)
        raise UserError(f"{text!r}: not a .safetensors or .gguf file; give {ACCEPTED}")
    shards = shard_names(path)
    if shards:
        return LocalSource("safetensors", tuple(path / name for name in shards), path)
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return LocalSource("gguf", (ggufs[0],), path)
    if ggufs:
        raise UserError(f"{text!r} holds {len(ggufs)} GGUF files; name the one to inspect")
    raise UserError(f"{text!r}: the folder holds no .safetensors or .gguf file")


def open_source(source: Source) -> TensorTable:
    """Read the source's headers (and config.json): never its weights."""
    where = source.where
    if isinstance(where, HubSource):
        return read_hub(source.text, where)
    if where.format == "gguf":
        table = read_gguf(source.text, where.paths[0])
    else:
        table = read_safetensors(source.text, list(where.paths), where.folder)
    table.notes.extend(where.notes)
    return table
