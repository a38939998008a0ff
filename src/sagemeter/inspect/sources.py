"""What `inspect` accepts as a SOURCE, checked before anything is read, and how each is opened.

PATH.safetensors | FOLDER   local safetensors (a folder may be sharded with an index)
PATH.gguf                   a GGUF file (llama.cpp)
local:CHECKPOINT            an embedded-engine checkpoint (a name or a .gguf path)
vllm:CHECKPOINT             what `vllm serve` would load: a packaged checkpoint's Hugging Face
                            export (its GGUF until the export is made), a .gguf file or a folder
                            on this machine, or ORG/NAME on the Hub
hf:ORG/NAME[@REVISION]      a Hub model, its headers read by range requests

An `ENGINE:SPEC` source is what that engine says it would load (the engine registry's optional
`source` member; local: and vllm: in engines/sources.py), so this package knows no engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagemeter.engine_registry import ReadsSources, engine_in
from sagemeter.errors import UserError
from sagemeter.inspect.gguf_file import read_gguf
from sagemeter.inspect.hub import HubSource, parse_hub_source, read_hub
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
    engine = engine_in(raw)
    if isinstance(engine, ReadsSources):  # local:, vllm: (engines/sources.py), a plug-in's
        return Source(raw, engine.source(raw.partition(":")[2].strip(), raw))
    if not raw:
        raise UserError(f"an empty source; give {ACCEPTED}")
    path = Path(raw).expanduser()
    if not path.exists():
        raise UserError(f"{text!r}: no such file or folder; give {ACCEPTED}")
    return Source(raw, local_path(path, raw))


def local_path(path: Path, text: str) -> LocalSource:
    """A file or folder on this machine as a source: one GGUF file, or a checkpoint's
    safetensors (a sharded folder with its index)."""
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
