"""What `inspect` accepts as a SOURCE, checked before anything is read, and how each is opened.

PATH.safetensors | FOLDER   local safetensors (a folder may be sharded with an index)
PATH.gguf                   a GGUF file (llama.cpp)
local:CHECKPOINT            an embedded-engine checkpoint (a name or a .gguf path)
vllm:CHECKPOINT             what `vllm serve` would load: a local folder or ORG/NAME on the Hub
hf:ORG/NAME[@REVISION]      a Hub model, its headers read by range requests
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagemeter.errors import UserError
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
        if Path(name).expanduser().exists():
            return Source(raw, _local_path(Path(name).expanduser(), raw))
        if REPO_ID.match(name.partition("@")[0]):
            return Source(raw, parse_hub_source(f"hf:{name}"))
        raise UserError(f"{text!r}: give vllm: a local checkpoint folder or a Hub ORG/NAME")
    if not raw:
        raise UserError(f"an empty source; give {ACCEPTED}")
    path = Path(raw).expanduser()
    if not path.exists():
        raise UserError(f"{text!r}: no such file or folder; give {ACCEPTED}")
    return Source(raw, _local_path(path, raw))


def _local_checkpoint(name: str, text: str) -> LocalSource:
    from sagemeter.engines.checkpoints import resolve_checkpoint

    if not name:
        raise UserError(f"{text!r} names no checkpoint")
    checkpoint = resolve_checkpoint(name, derive=False)
    if not checkpoint.path.is_file():
        raise UserError(
            f"{text}: the checkpoint is not derived yet; run `sagemeter checkpoints --prepare`"
        )
    return LocalSource("gguf", (checkpoint.path,), checkpoint.path.parent)


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
        from sagemeter.inspect.gguf_file import read_gguf

        return read_gguf(source.text, where.paths[0])
    return read_safetensors(source.text, list(where.paths), where.folder)
