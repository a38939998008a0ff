"""The known-truth server: an OpenAI-compatible API on 127.0.0.1 whose timing is set in advance.

A load generator is checked against it: every figure a perfect client would measure follows from
`TruthTiming`. It is raw asyncio (non-blocking sockets written directly, connections kept
alive, chunked transfer encoding, bytes built once per reply shape) with one shared timer, so
that at 128 streams of 4 ms tokens it stays under 0.4 core and leaves the machine to the client
under test.

How exact: nothing leaves before its deadline, and every deadline counts from the moment the
request's bytes reached the server (the kernel's receive stamp on Linux, calibrate/arrival.py),
not from when the server got round to parsing them. First tokens and reply ends are woken for on
time (a fraction of a millisecond late on a quiet machine); the tokens in between may wait up to
`DEFAULT_BATCH_GAP_S` to share a wake-up. GET /stats reports the server's own CPU and how late
its writes actually were, so a benchmark can show the truth held.

Run it as `python -m sagemeter.calibrate.server --ttft 0.05 --itl 0.004 [--port-file F]`, or use
`running_truth_server` (a child process) or `sagemeter calibrate-server`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagemeter.atomic import open_output, write_text_atomic
from sagemeter.calibrate import wire
from sagemeter.calibrate.answers import KnownAnswers, WrongShares
from sagemeter.calibrate.child import die_with_parent, running_truth_server
from sagemeter.calibrate.connection import ClosePolicy, Connection, Listener, RequestError
from sagemeter.calibrate.faults import Faults, nth, restarted, swapped
from sagemeter.calibrate.http1 import Request
from sagemeter.calibrate.loops import run_precisely
from sagemeter.calibrate.prompts import PrefixCache, prompt_tokens
from sagemeter.calibrate.scheduler import DEFAULT_BATCH_GAP_S, Scheduler, grid_period
from sagemeter.calibrate.slots import ArrivalLog, SlotGate, SlotSink
from sagemeter.calibrate.streams import (
    Counters,
    Sink,
    StreamFaults,
    StreamReply,
    WholeReply,
)
from sagemeter.calibrate.timing import TruthTiming
from sagemeter.transport.bad_json import BAD_JSON

__all__ = [
    "DEFAULT_BATCH_GAP_S",
    "TruthApp",
    "TruthTiming",
    "main",
    "running_truth_server",
    "serve",
]

DEFAULT_MAX_TOKENS = 16
MAX_TOKENS_LIMIT = 100_000
_GENERATION = {"/v1/chat/completions": wire.Kind.CHAT, "/v1/completions": wire.Kind.COMPLETION}


def _max_tokens(body: dict[str, Any]) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise RequestError(400, f"{key} must be a whole number")
        if not 1 <= value <= MAX_TOKENS_LIMIT:
            raise RequestError(400, f"{key} must be from 1 to {MAX_TOKENS_LIMIT}")
        return value
    return DEFAULT_MAX_TOKENS


def _arrival_clock(listener: Listener | None) -> str | None:
    if listener is None or listener.kernel_stamps is None:
        return None
    return "kernel" if listener.kernel_stamps else "read"


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) and len(model) <= 256 else wire.MODEL_ID


def _parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except BAD_JSON:
        raise RequestError(400, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    return body


class TruthApp:
    """Routes requests and keeps the counters; one per server."""

    def __init__(
        self,
        timing: TruthTiming,
        scheduler: Scheduler,
        faults: Faults | None = None,
        max_model_len: int | None = None,
        gate: SlotGate | None = None,
        arrival_log: ArrivalLog | None = None,
        answers: KnownAnswers | None = None,
    ) -> None:
        self.timing = timing
        self.gate = gate
        self.arrival_log = arrival_log
        self.answers = answers
        self.scheduler = scheduler
        self.faults = faults or Faults()
        self.max_model_len = max_model_len
        self.counters = Counters()
        self.cache = PrefixCache() if timing.prefix_cache else None
        self.prompt_tokens = 0
        self.cached_prompt_tokens = 0
        self.generations = 0
        self.started = time.monotonic()
        self.started_wall = time.time()  # the process start /metrics gives (restart_after)
        self.listener: Listener | None = None

    def stats(self) -> dict[str, Any]:
        """The shared interface's four keys first; the rest tell how well the timing held.

        Lateness (write time − deadline) is kept as sums, so a reader can take differences
        between two reads; "exact" writes are first tokens and reply ends.
        """
        usage = resource.getrusage(resource.RUSAGE_SELF)
        scheduler = self.scheduler
        return {
            "requests": self.counters.requests,
            "tokens": self.counters.tokens,
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "uptime_s": time.monotonic() - self.started,
            "cpu_user_s": usage.ru_utime,
            "cpu_system_s": usage.ru_stime,
            "connections": self.listener.accepted if self.listener else 0,
            # Deadlines count from the kernel's receive stamp ("kernel") or from the read.
            "arrival_clock": _arrival_clock(self.listener),
            "pending_replies": len(scheduler),
            "wakeups": scheduler.wakeups,
            "writes": scheduler.writes,
            "lateness_sum_s": scheduler.late_sum_s,
            "lateness_max_s": scheduler.late_max_s,
            "exact_writes": scheduler.exact_writes,
            "exact_lateness_sum_s": scheduler.exact_late_sum_s,
            "first_tokens": self.counters.first_tokens,
            "first_token_lateness_sum_s": self.counters.first_token_late_sum_s,
            "ttft_s": self.timing.ttft_s,
            "itl_s": self.timing.itl_s,
            "prefill_s": self.timing.prefill_s,
            "prefix_cache": self.timing.prefix_cache,
            # Prompt tokens of every generation request, and those the prefix cache served.
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "max_model_len": self.max_model_len,
            "batch_gap_s": scheduler.batch_gap_s,
            "niceness": os.getpriority(os.PRIO_PROCESS, 0),
            "generation_requests": self.generations,
            # Requests met by a close before any answer (--connection-close on-reuse).
            "closed_unanswered": self.listener.policy.lost if self.listener else 0,
            # --slots: replies served at once at most, and how the queue behind them fared.
            "slots": self.gate.slots if self.gate else None,
            "in_service": self.gate.in_service if self.gate else None,
            "queued_now": len(self.gate.waiting) if self.gate else None,
            "queued_total": self.gate.queued_total if self.gate else None,
        }

    def respond(self, request: Request, connection: Connection) -> bytes | None:
        """Answer at once (bytes), or schedule a timed reply on `connection` (None)."""
        kind = _GENERATION.get(request.path)
        if kind is not None:
            if request.method != "POST":
                raise RequestError(405, f"{request.path} takes POST")
            body = _parse_body(request.body)
            key = self.faults.require_key
            if key and request.authorization != b"Bearer " + key.encode():
                return wire.error_response(401, "a missing or wrong API key")
            self.generations += 1
            if self.generations == self.faults.restart_after + 1 and self.faults.restart_after:
                self.started_wall = time.time()  # the restarted process's start
            if self.faults.any:
                return self._misbehave(kind, body, connection, self.generations, request)
            self._schedule(kind, body, connection)
            return None
        if request.method != "GET":
            if request.path in ("/v1/models", "/health", "/stats", "/metrics"):
                raise RequestError(405, f"{request.path} takes GET")
            raise RequestError(404, f"no such path: {request.path}")
        if request.path == "/v1/models":
            model = wire.SWAPPED_MODEL_ID if swapped(self.faults, self.generations) else None
            return wire.models(self.max_model_len, model or wire.MODEL_ID)
        if request.path == "/health":
            return wire.HEALTH
        if request.path == "/stats":
            return wire.json_response(200, self.stats())
        if request.path == "/metrics" and self.faults.restart_after:
            return self._metrics()
        raise RequestError(404, f"no such path: {request.path}")

    def _metrics(self) -> bytes:
        """A Prometheus page as a restarted process gives it (the restart_after fault): the
        start time of the process now answering and its count of generations since then."""
        after = self.faults.restart_after
        count = (
            self.generations - after
            if restarted(self.faults, self.generations)
            else (self.generations)
        )
        page = (
            "# TYPE process_start_time_seconds gauge\n"
            f"process_start_time_seconds {self.started_wall:.3f}\n"
            "# TYPE truth_generation_requests counter\n"
            f"truth_generation_requests_total {count}\n"
        )
        return wire.raw_response(200, "text/plain; version=0.0.4", page.encode())

    def _misbehave(
        self,
        kind: wire.Kind,
        body: dict[str, Any],
        connection: Connection,
        number: int,
        request: Request,
    ) -> bytes | None:
        """Answer the `number`-th generation request as the faults say (calibrate/faults.py)."""
        faults = self.faults
        if 0 < faults.die_after < number:
            os._exit(3)  # a crash: no reply, no cleanup, every connection closed by the kernel
        if faults.silent:
            return None  # the connection stays busy: nothing will ever be written
        if faults.answer == "html":
            return wire.NOT_AN_API_PAGE
        if faults.answer == "no-choices":
            return wire.NO_CHOICES
        if nth(faults.fail_every, number):
            status = faults.fail_status
            message = "rate limited" if status == 429 else "the server failed on purpose"
            return wire.error_response(status, message, retry_after_s=faults.retry_after_s)
        key = request.authorization.removeprefix(b"Bearer ").decode("latin-1")
        echo = key if faults.echo_key_split else ""
        stream = self._stream_faults(kind, body, number, echo)
        self._schedule(kind, body, connection, stream, echo)
        return None

    def _stream_faults(
        self, kind: wire.Kind, body: dict[str, Any], number: int, key: str = ""
    ) -> StreamFaults | None:
        faults = self.faults
        model = self._reply_model(body)
        chunk_for = None
        pieces = key_pieces(key, faults.echo_key_split)
        if faults.empty_every or (faults.reasoning_tokens and kind is wire.Kind.CHAT) or pieces:

            def chunk_for(index: int) -> bytes:
                empty = faults.empty_every > 0 and index % faults.empty_every == 0
                reasoning = kind is wire.Kind.CHAT and index < faults.reasoning_tokens
                text = "" if empty else wire.TOKEN_TEXT
                if index < len(pieces):
                    text = pieces[index]
                return wire.content_chunk(kind, model, index == 0, text, reasoning)

        stall = nth(faults.stall_every, number) or number == faults.stall_once > 0
        drop = nth(faults.drop_every, number)
        if chunk_for is None and not stall and not drop:
            return None
        return StreamFaults(
            chunk_for=chunk_for,
            pause_after=faults.stall_after if stall else None,
            pause_s=faults.stall_s if stall else 0.0,
            drop_after=faults.drop_after if drop else None,
        )

    def _reply_model(self, body: dict[str, Any]) -> str:
        """The reply's `model`: the request's, or the other model once it has been swapped in."""
        return wire.SWAPPED_MODEL_ID if swapped(self.faults, self.generations) else _model(body)

    def _prompt(self, body: dict[str, Any], max_tokens: int) -> wire.PromptCount:
        """The prompt's token count and the tokens the prefix cache served, counted in /stats;
        a prompt that does not fit the context is refused."""
        tokens = prompt_tokens(body)
        limit = self.max_model_len
        if limit is not None and len(tokens) + max_tokens > limit:
            raise RequestError(
                400,
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{len(tokens) + max_tokens} tokens ({len(tokens)} in the messages, "
                f"{max_tokens} in the completion).",
            )
        cached = self.cache.take(tokens) if self.cache is not None else None
        self.prompt_tokens += len(tokens)
        self.cached_prompt_tokens += cached or 0
        return wire.PromptCount(tokens=len(tokens), cached=cached)

    def _schedule(
        self,
        kind: wire.Kind,
        body: dict[str, Any],
        connection: Connection,
        faults: StreamFaults | None = None,
        echo: str = "",
    ) -> None:
        """Reply to one generation when its time comes; `echo` (a key the echo fault sends
        back) opens a whole reply's text, a stream's comes in pieces through `faults`."""
        arrived = connection.arrived
        tokens = _max_tokens(body)
        model = self._reply_model(body)
        reported = max(0, tokens + self.faults.usage_offset)  # what `usage` says
        prompt = self._prompt(body, tokens)
        first_s = self.timing.first_token_seconds(prompt.tokens or 0, prompt.cached or 0)
        if self.faults.no_prompt_tokens:
            prompt = wire.PromptCount(tokens=None)
        itl = self.timing.itl_s
        stream = body.get("stream") is True
        if stream:
            connection.write(wire.STREAM_HEAD)
        gated = SlotSink(connection, self.gate) if self.gate is not None else None
        sink: Sink = gated if gated is not None else connection
        text = None if stream or self.answers is None else self.answers.reply_for(body)
        if text is not None:  # a known question: its answer, one token per word
            tokens = max(1, len(text.split()))
            reported = max(0, tokens + self.faults.usage_offset)

        def start(started: float) -> None:
            """The reply's service begins at `started` (its arrival, or when a slot freed)."""
            if self.arrival_log is not None:
                self.arrival_log.write(arrived, started)
            if sink.closed:
                return
            first_at = started + first_s
            if stream:
                chunks = (
                    wire.content_chunk(kind, model, True),
                    wire.content_chunk(kind, model, False),
                    wire.stream_end(kind, model, reported, prompt),
                )
                reply = StreamReply(sink, self.counters, first_at, itl, tokens, chunks, faults)
                self.scheduler.add(reply.first_at, reply)
            else:
                data = wire.whole_reply(kind, model, tokens, reported, prompt, echo, text)
                whole = WholeReply(sink, self.counters, tokens, data)
                self.scheduler.add(first_at + tokens * itl, whole)

        if self.gate is None or gated is None:
            start(arrived)
        else:
            self.gate.admit(gated, arrived, start)


def key_pieces(key: str, count: int) -> list[str]:
    """`key` cut into `count` pieces of near-equal length (none when off or no key)."""
    if count < 2 or not key:
        return []
    size = -(-len(key) // count)
    return [key[start : start + size] for start in range(0, len(key), size)]


async def serve(
    timing: TruthTiming,
    port: int = 0,
    on_ready: Callable[[int], None] | None = None,
    batch_gap_s: float = DEFAULT_BATCH_GAP_S,
    faults: Faults | None = None,
    max_model_len: int | None = None,
    slots: int | None = None,
    arrival_log: Path | None = None,
    answers: KnownAnswers | None = None,
) -> None:
    """Serve on 127.0.0.1:`port` (0: any free one) until cancelled; `on_ready(port)` once bound.

    `max_model_len` (tokens) is said in /v1/models, and a prompt plus its reply that would not
    fit is refused with HTTP 400, as vLLM does. `slots` serves at most that many generations at
    once (the rest queue); `arrival_log` gets a JSON line per generation (calibrate/slots.py).
    `answers` answers known quality questions with a known share wrong (calibrate/answers.py)."""
    loop = asyncio.get_running_loop()
    scheduler = Scheduler(loop, grid_period(batch_gap_s, timing.itl_s))
    gate = SlotGate(slots, loop.call_soon) if slots is not None else None
    log = None
    if arrival_log is not None:  # never through a link, into a FIFO or onto a device
        stream = io.TextIOWrapper(open_output(arrival_log, "--arrival-log"), encoding="utf-8")
        log = ArrivalLog(stream)
    app = TruthApp(timing, scheduler, faults, max_model_len, gate, log, answers)
    policy = ClosePolicy(faults.connection_close if faults is not None else "")
    listener = Listener(loop, port, app.respond, policy)
    app.listener = listener
    if on_ready is not None:
        on_ready(listener.port)
    try:
        await loop.create_future()  # until cancelled
    finally:
        listener.close()
        if log is not None:
            log.close()


def main(argv: list[str] | None = None) -> None:
    """The child-process entry point: seconds as plain numbers, the port written to a file or
    an inherited pipe."""
    parser = argparse.ArgumentParser(prog="python -m sagemeter.calibrate.server")
    parser.add_argument("--ttft", type=float, required=True, help="seconds to the first token")
    parser.add_argument("--itl", type=float, required=True, help="seconds between tokens")
    parser.add_argument("--prefill", type=float, default=0.0, help="seconds per prompt token")
    parser.add_argument("--prefix-cache", action="store_true", help="cache 16-token blocks")
    parser.add_argument("--max-model-len", type=int, help="context length in tokens")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--port-fd", type=int, help="an inherited pipe to write the port line to")
    parser.add_argument("--batch-gap", type=float, default=DEFAULT_BATCH_GAP_S)
    parser.add_argument("--parent-pid", type=int, help="stop when this process ends")
    parser.add_argument("--slots", type=int, help="generations served at once (the rest queue)")
    parser.add_argument("--arrival-log", type=Path, help="a JSON line per generation request")
    parser.add_argument("--wrong-share", type=float, help="share of known questions wrong")
    parser.add_argument("--wrong-share-extra", type=float, default=0.0)
    parser.add_argument("--wrong-seed", type=int, default=0)
    parser.add_argument("--questions", action="append", default=[], help="a question set to know")
    add_fault_arguments(parser)
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)

    def ready(port: int) -> None:
        if args.port_file is not None:
            write_text_atomic(args.port_file, f"{port}\n")
        if args.port_fd is not None:
            with open(args.port_fd, "w", closefd=True) as pipe:
                pipe.write(f"{port}\n")

    faults = faults_from(args)
    answers = None
    if args.wrong_share is not None:
        shares = WrongShares(args.wrong_share, args.wrong_share_extra, args.wrong_seed)
        answers = KnownAnswers.of(shares, tuple(args.questions))
    timing = TruthTiming(args.ttft, args.itl, args.prefill, args.prefix_cache)
    run_precisely(
        serve(
            timing,
            args.port,
            ready,
            args.batch_gap,
            faults,
            args.max_model_len,
            args.slots,
            args.arrival_log,
            answers,
        )
    )


def add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per field of `Faults`, spelled as `Faults.args` writes them."""
    for item in dataclasses.fields(Faults):
        flag = "--" + item.name.replace("_", "-")
        if item.type in ("bool", bool):
            parser.add_argument(flag, action="store_true")
        elif item.name == "retry_after_s":
            parser.add_argument(flag, type=float)
        elif item.name in ("answer", "require_key", "connection_close"):
            parser.add_argument(flag, default="")
        elif item.name == "stall_s":
            parser.add_argument(flag, type=float, default=0.0)
        else:
            parser.add_argument(flag, type=int, default=item.default)


def faults_from(args: argparse.Namespace) -> Faults:
    values = {item.name: getattr(args, item.name) for item in dataclasses.fields(Faults)}
    return Faults(**values)


if __name__ == "__main__":
    main()
