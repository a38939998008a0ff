"""A loopback stand-in for the Hugging Face Hub: the API and resolve paths, with Range support.

It speaks what `huggingface_hub` asks of the real Hub when it reads a model's files:
  GET  /api/models/ORG/NAME[/revision/REV]   model info: commit sha and file list
  HEAD /ORG/NAME/resolve/REV/FILE            size, ETag and commit headers
  GET  /ORG/NAME/resolve/REV/FILE            the file, or the byte range a Range header asks for
with the Hub's error headers (X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound,
GatedRepo). It counts every byte of file content it sends, per file, so a test can check that
only headers were read.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass
class Repo:
    files: dict[str, Path]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    token: str | None = None  # a gated repo answers only to this bearer token
    honour_range: bool = True  # False: answer every GET with the whole file, as some proxies do


@dataclass
class Hub:
    repos: dict[str, Repo]
    url: str = ""
    sent: Counter[tuple[str, str]] = field(default_factory=Counter)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)

    def bytes_sent(self, repo: str, file: str) -> int:
        return self.sent[(repo, file)]


class HubHandler(BaseHTTPRequestHandler):
    hub: Hub

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _fail(self, status: int, code: str) -> None:
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _serve(self, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        self.hub.requests.append((self.command, path, self.headers.get("Range")))
        self.hub.authorizations.append(self.headers.get("Authorization"))
        api = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/(.+))?$", path)
        resolve = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        found = api or resolve
        if found is None:
            return self._fail(404, "NotFound")
        repo_id = found.group(1)
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._fail(404, "RepoNotFound")
        if repo.token and self.headers.get("Authorization") != f"Bearer {repo.token}":
            return self._fail(401, "GatedRepo")
        revision = found.group(2)
        if revision not in (None, "main", repo.sha):
            return self._fail(404, "RevisionNotFound")
        if api:
            return self._json(repo_id, repo)
        assert resolve is not None
        file = resolve.group(3)
        if file not in repo.files:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("X-Repo-Commit", repo.sha)
            self.send_header("Content-Length", "0")
            return self.end_headers()
        self._file(repo_id, repo, file, head)

    def _json(self, repo_id: str, repo: Repo) -> None:
        body = json.dumps(
            {
                "id": repo_id,
                "modelId": repo_id,
                "sha": repo.sha,
                "private": False,
                "gated": "manual" if repo.token else False,
                "siblings": [{"rfilename": name} for name in sorted(repo.files)],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _file(self, repo_id: str, repo: Repo, file: str, head: bool) -> None:
        path = repo.files[file]
        size = path.stat().st_size
        start, end = 0, size - 1
        ranged = self.headers.get("Range") if repo.honour_range else None
        if ranged and (match := RANGE.match(ranged.strip())):
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
        length = max(0, end - start + 1)
        etag = hashlib.sha256(f"{repo.sha}/{file}".encode()).hexdigest()
        self.send_response(206 if ranged and not head else 200)
        self.send_header("X-Repo-Commit", repo.sha)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Accept-Ranges", "bytes")
        if ranged and not head:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(length if not head else size))
        self.end_headers()
        if head:
            return
        with open(path, "rb") as handle:
            handle.seek(start)
            remaining = length
            while remaining > 0:
                chunk = handle.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                # Counted before it is written: a client that has read it sees it counted.
                self.hub.sent[(repo_id, file)] += len(chunk)
                self.wfile.write(chunk)
                remaining -= len(chunk)


@contextmanager
def serve_hub(repos: dict[str, Repo]) -> Iterator[Hub]:
    """The fake Hub on 127.0.0.1 (a free port) for the duration of the block."""
    hub = Hub(repos)
    handler = type("BoundHubHandler", (HubHandler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # A short poll: `shutdown` waits for the loop to look, half a second at the default.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
