"""What `inspect` (and `sagemaker recommend`) read for a `local:` or `vllm:` source: the files the
engine would load, found without deriving, exporting or downloading anything.

inspect/sources.py asks an engine for this through the engine registry's optional `source`
member, so the inspect package knows no engine; the engines know inspect's source kinds.
"""

from __future__ import annotations

from pathlib import Path

from sagemeter.engines.checkpoints import CHECKPOINT_NAMES, resolve_checkpoint
from sagemeter.engines.hf_export import current_export, planned_model
from sagemeter.errors import UserError
from sagemeter.inspect.hub import REPO_ID, HubSource, parse_hub_source
from sagemeter.inspect.sources import LocalSource, local_path


def vllm_source(name: str, text: str) -> LocalSource | HubSource:
    """`vllm:CHECKPOINT`: a packaged checkpoint's Hugging Face export (its GGUF until the export
    is made), a .gguf file or a folder on this machine, or ORG/NAME on the Hub."""
    if name in CHECKPOINT_NAMES or name.endswith(".gguf"):
        return _vllm_export(name, text)
    if Path(name).expanduser().exists():
        return local_path(Path(name).expanduser(), text)
    if REPO_ID.match(name.partition("@")[0]):
        return parse_hub_source(f"hf:{name}")
    raise UserError(
        f"{text!r}: give vllm: smollm2-f32, a .gguf file, a local checkpoint folder "
        "or a Hub ORG/NAME"
    )


def local_source(name: str, text: str) -> LocalSource:
    """`local:CHECKPOINT`: the checkpoint's GGUF file, once derived."""
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
        return local_path(model.folder, text)
    if not source.path.is_file():
        raise UserError(
            f"{text}: vLLM serves an export of local:{name}, which is not derived yet; "
            "run `sagemeter checkpoints --prepare`"
        )
    folder = current_export(model)
    if folder is not None:
        read = local_path(folder, text)
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
