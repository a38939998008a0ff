"""Checkpoints on the Hugging Face Hub, read by HTTP range requests, never downloaded.

`huggingface_hub` does the reading: `model_info` pins the revision to a commit and lists the
files, `get_safetensors_metadata` fetches each safetensors header with range requests, and
config.json (a few kilobytes) is fetched whole. `HF_ENDPOINT` points it at another Hub; `HF_TOKEN`
(or a saved login) opens gated models and is sent only to that Hub, never printed or stored.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemeter.errors import UserError
from sagemeter.inspect.safetensors_files import CONFIG_FILE, header_records
from sagemeter.inspect.table import TensorRecord, TensorTable
from sagemeter.paths import cache_dir

if TYPE_CHECKING:
    from huggingface_hub import HfApi

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
HF_FORM = "hf:ORG/NAME or hf:ORG/NAME@REVISION"


@dataclass(frozen=True)
class HubSource:
    repo_id: str
    revision: str | None

    def __str__(self) -> str:
        return f"hf:{self.repo_id}" + (f"@{self.revision}" if self.revision else "")


def parse_hub_source(text: str) -> HubSource:
    """`hf:ORG/NAME[@REVISION]`, checked before anything is fetched."""
    body = text.removeprefix("hf:").strip()
    repo_id, _, revision = body.partition("@")
    if not REPO_ID.match(repo_id) or ".." in repo_id:
        raise UserError(f"{text!r}: give a Hub model as {HF_FORM}")
    if "@" in body and not revision:
        raise UserError(f"{text!r}: the revision after @ is empty; give {HF_FORM}")
    return HubSource(repo_id, revision or None)


def hub_endpoint() -> str:
    """The Hub to ask: HF_ENDPOINT when set (read now, not when huggingface_hub was imported)."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


class HubFiles:
    """Byte ranges of a repository's files at one commit, by range request."""

    def __init__(self, api: HfApi, source: HubSource, commit: str) -> None:
        self.api = api
        self.source = source
        self.commit = commit
        self.bytes_read = 0
        self._data_offsets: dict[str, int] = {}

    def data_offset(self, file: str) -> int:
        """Where the file's data section starts: after its 8-byte header size and the header."""
        if file not in self._data_offsets:
            size = int.from_bytes(self.read(file, 0, 8), "little")
            self._data_offsets[file] = 8 + size
        return self._data_offsets[file]

    def read(self, file: str, start: int, length: int) -> bytes:
        from huggingface_hub import get_session, hf_hub_url, hf_raise_for_status

        # Exported lazily by huggingface_hub.utils, which mypy cannot follow.
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        url = hf_hub_url(
            self.source.repo_id, file, revision=self.commit, endpoint=self.api.endpoint
        )
        headers = {
            **build_hf_headers(token=self.api.token),
            "range": f"bytes={start}-{start + length - 1}",
        }
        with (
            _translated(self.source),
            get_session().stream("GET", url, headers=headers) as response,
        ):
            hf_raise_for_status(response)
            if response.status_code != 206 and start != 0:
                raise UserError(
                    f"{self.source}: the Hub at {self.api.endpoint} ignored a range request "
                    f"for {file}; the grid check reads sampled blocks only and stops here"
                )
            data = b""
            # A server that ignores Range sends the whole file: stop at what was asked.
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) >= length:
                    break
        data = data[:length]
        self.bytes_read += len(data)
        return data


def read_hub(text: str, source: HubSource) -> TensorTable:
    """Every safetensors header of a Hub model (range requests) and its config.json."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_endpoint())
    with _translated(source):
        info = api.model_info(source.repo_id, revision=source.revision)
        commit = info.sha or source.revision or "main"
        files = {sibling.rfilename for sibling in info.siblings or []}
        if not any(name.endswith(".safetensors") for name in files):
            ggufs = sorted(name for name in files if name.endswith(".gguf"))
            hint = (
                f"; it holds GGUF files ({', '.join(ggufs[:3])}): download one and inspect its path"
                if ggufs
                else ""
            )
            raise UserError(f"{source}: the repository holds no safetensors files{hint}")
        metadata = api.get_safetensors_metadata(source.repo_id, revision=commit)
        config = _config(api, source, commit) if CONFIG_FILE in files else None
    tensors: list[TensorRecord] = []
    for file, header in sorted(metadata.files_metadata.items()):
        raw = {
            name: {"dtype": info.dtype, "shape": info.shape, "data_offsets": info.data_offsets}
            for name, info in header.tensors.items()
        }
        # Offsets count from each file's data section; HubFiles.data_offset finds where it starts.
        tensors.extend(header_records(raw, file, 0, None, f"{source}/{file}"))
    return TensorTable(
        source=text,
        format="safetensors",
        location=f"{hub_endpoint()}/{source.repo_id}",
        files=sorted(metadata.files_metadata),
        tensors=tensors,
        reader=HubFiles(api, source, commit),
        config=config,
        revision=commit,
    )


def _config(api: HfApi, source: HubSource, commit: str) -> dict[str, Any] | None:
    # Kept in sagemeter's own cache (SAGEMETER_HOME moves it), not the user's Hub cache.
    path = api.hf_hub_download(
        source.repo_id, CONFIG_FILE, revision=commit, cache_dir=str(cache_dir() / "hub")
    )
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return config if isinstance(config, dict) else None


class _translated:
    """Turns the Hub's errors into one sentence a person can act on (the token never appears)."""

    def __init__(self, source: HubSource) -> None:
        self.source = source

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        if exc is None:
            return
        message = _hub_message(self.source, exc)
        if message is not None:
            raise UserError(message) from None


def _hub_message(source: HubSource, exc: BaseException) -> str | None:
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        NotASafetensorsRepoError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
        SafetensorsParsingError,
    )

    where = hub_endpoint()
    if isinstance(exc, GatedRepoError):
        return (
            f"{source}: the model is gated; accept its terms on the Hub and set HF_TOKEN "
            "(or `hf auth login`) to a token that may read it"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return (
            f"{source}: no such model at {where} (a private one needs HF_TOKEN set to a token "
            "that may read it)"
        )
    if isinstance(exc, RevisionNotFoundError):
        return f"{source}: the model has no revision {source.revision!r}"
    if isinstance(exc, RemoteEntryNotFoundError):
        return f"{source}: a file the model lists is missing on the Hub ({_first_line(exc)})"
    if isinstance(exc, NotASafetensorsRepoError):
        return f"{source}: no model.safetensors or model.safetensors.index.json in the repository"
    if isinstance(exc, SafetensorsParsingError):
        return f"{source}: a safetensors header could not be parsed ({_first_line(exc)})"
    if isinstance(exc, HfHubHTTPError):
        return f"{source}: the Hub at {where} answered {_first_line(exc)}"
    if isinstance(exc, httpx2.HTTPError):
        return f"{source}: could not read from {where} ({type(exc).__name__}: {_first_line(exc)})"
    return None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
