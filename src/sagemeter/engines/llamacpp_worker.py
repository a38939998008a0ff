"""The embedded engine's own process: llama.cpp's native server (through xllamacpp) on 127.0.0.1.

It runs apart from the measuring client so that its C-level log can be captured to a file (the
start-up facts come from it), a crash cannot take the client down, and stopping it is a signal.
Run as `python -m sagemeter.engines.llamacpp_worker MODEL --port P --parallel N --ctx-per-slot C`.
It prints one JSON line `{"listening": URL}` on stdout once the model is loaded, then serves
until SIGTERM/SIGINT or until its stdin closes (so it never outlives a parent that died).

llama.cpp answers any `Host` header, so it listens on a Unix socket in a folder only this user
may enter, and the URL printed is `hostguard`'s: the one TCP door, which refuses a request
naming another host (DNS rebinding from a browser page).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from sagemeter.hostguard import HostGuard
from sagemeter.parentwatch import die_with_parent

UNIX_PORT = 8080  # llama.cpp binds a Unix socket only with a non-zero port, which it ignores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sagemeter-llamacpp-worker")
    parser.add_argument("model")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--ctx-per-slot", type=int, required=True)
    parser.add_argument("--threads", type=int, default=-1)
    parser.add_argument("--alias", default=None)
    args = parser.parse_args(argv)
    # Its stdin closing covers a parent that died, unless the pipe leaked to another process.
    die_with_parent(signal.SIGTERM)
    private = tempfile.TemporaryDirectory(prefix="sagemeter-engine-")  # mode 0700
    socket_path = str(Path(private.name) / "llama.sock")
    try:  # bound before the model loads, so a busy port fails at once, as llama.cpp says it
        guard = HostGuard(socket_path, args.port)
    except OSError as exc:
        print(f"couldn't bind HTTP server socket, port: {args.port}: {exc}", file=sys.stderr)
        return 1

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    if args.alias:
        params.model_alias = {args.alias}
    params.hostnames = [socket_path]  # a name ending ".sock" is a Unix socket to llama.cpp
    params.port = UNIX_PORT
    params.n_parallel = args.parallel
    params.n_ctx = args.parallel * args.ctx_per_slot
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cont_batching = True
    params.endpoint_metrics = True
    params.endpoint_props = True
    params.verbosity = 4  # the level at which llama.cpp logs its buffer sizes
    _server = xllamacpp.Server(params)  # held until the process ends (never torn down)

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(json.dumps({"listening": guard.url}), flush=True)
    stop.wait()
    guard.close()
    private.cleanup()
    # Out at once, the server not torn down: its teardown waits for every reply in flight to
    # finish decoding (measured: still running 120 s after SIGTERM with four long replies
    # queued), which left an engine whose parent was killed decoding for minutes, and made every
    # stop of a busy engine wait for SIGKILL. Nothing the server holds outlives the process.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
