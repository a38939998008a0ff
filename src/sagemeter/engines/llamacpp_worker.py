"""The embedded engine's own process: llama.cpp's native server (through xllamacpp) on 127.0.0.1.

It runs apart from the measuring client so that its C-level log can be captured to a file (the
start-up facts come from it), a crash cannot take the client down, and stopping it is a signal.
Run as `python -m sagemeter.engines.llamacpp_worker MODEL --port P --parallel N --ctx-per-slot C`.
It prints one JSON line `{"listening": URL}` on stdout once the model is loaded, then serves
until SIGTERM/SIGINT or until its stdin closes (so it never outlives a parent that died).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from sagemeter.parentwatch import die_with_parent


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

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    if args.alias:
        params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.parallel * args.ctx_per_slot
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cont_batching = True
    params.endpoint_metrics = True
    params.endpoint_props = True
    params.verbosity = 4  # the level at which llama.cpp logs its buffer sizes
    server = xllamacpp.Server(params)

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(json.dumps({"listening": server.listening_address}), flush=True)
    stop.wait()
    del server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
