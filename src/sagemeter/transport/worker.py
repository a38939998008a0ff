"""One worker process: its own event loop, its share of the streams or arrivals, its records.

Run as `python -m sagemeter.transport.worker` by the parent (`pool.py`), which writes a pickled
`WorkerPlan` to its stdin. The worker opens its connections, answers `ready`, reads the common
start instant (wall clock), runs until the deadline plus the drain of what is in flight (or, for
a batch, until each stream has sent its requests), and writes a pickled `WorkerOutput` to its
stdout; then it waits for the next plan, so one pool serves every batch of a measurement. Only
hot-path modules are imported here (no pydantic, no numpy), so a worker is up in about a tenth of
a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import signal
import ssl
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from sagemeter.parentwatch import die_with_parent
from sagemeter.redaction import known_secrets, register_secret
from sagemeter.request_record import LiveRecord, RequestRecord
from sagemeter.transport.address import host_port
from sagemeter.transport.clock import LagSampler, perf_counter_at, sleep_until
from sagemeter.transport.deck import Deck
from sagemeter.transport.done_count import DoneSlot
from sagemeter.transport.events import check_reply_model, first_reply_model
from sagemeter.transport.http1 import Connection, connect_failure, open_connection
from sagemeter.transport.reopen import send_reopening
from sagemeter.transport.retry import NO_RETRIES, RetryPolicy, send_with_retries
from sagemeter.transport.slo_stop import SloStop, misses

READY = b"ready\n"
FAILED = b"failed\n"
RECONNECT_PAUSE_S = 0.1
# A server that refuses everything must not be hammered: after a failed request a closed-loop
# stream waits FAILURE_PAUSE_S, doubling per failure in a row up to FAILURE_PAUSE_MAX_S; and a
# worker whose first STOP_AFTER_FAILURES requests all failed stops sending and says why.
FAILURE_PAUSE_S = 0.05
FAILURE_PAUSE_MAX_S = 2.0
STOP_AFTER_FAILURES = 32
_LENGTH = struct.Struct("!Q")


def send_message(channel: IO[bytes], message: object) -> None:
    """One pickle, length first, written whole.

    The descriptor is made blocking first: an event loop may have left the pipe non-blocking,
    and a buffered write to a full non-blocking pipe silently keeps only part of the message.
    """
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    channel.flush()
    fd = channel.fileno()
    os.set_blocking(fd, True)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def receive_message(channel: IO[bytes]) -> Any:
    """The next `send_message` message; EOFError when the other side is gone."""
    head = _read_exactly(channel, _LENGTH.size)
    return pickle.loads(_read_exactly(channel, _LENGTH.unpack(head)[0]))


def _read_exactly(channel: IO[bytes], size: int) -> bytes:
    parts: list[bytes] = []
    while size > 0:
        part = channel.read(size)
        if not part:
            raise EOFError("the pipe closed mid-message")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


@dataclass(frozen=True)
class WorkerPlan:
    """What one worker does: closed-loop `streams` (global ids) or open-loop `arrivals`.

    A batch is closed-loop streams that each send `requests_per_stream` requests (0: until the
    deadline), each stream its own bytes from `stream_payloads` when given, failed requests sent
    again by `retry`.
    """

    worker: int
    host: str
    port: int
    tls: bool
    server_name: str
    payload: bytes
    duration_s: float
    timeout_s: float
    streams: tuple[int, ...] = ()
    arrivals: tuple[tuple[int, float], ...] = ()
    preopen: int = 0
    lag_interval_s: float = 0.01
    prefer_uvloop: bool = True
    stream_payloads: tuple[bytes, ...] = ()
    requests_per_stream: int = 0
    max_tokens: int | None = None
    stall_s: float = 0.0
    retry: RetryPolicy = NO_RETRIES
    expected_model: str | None = None  # a reply naming another model is a failure
    done_fd: int = -1  # the inherited `DoneCount` file this worker writes its finished count into
    slo_stop: SloStop | None = None  # stop sending once the run's misses say it cannot pass
    # A workload's own requests (transport/deck.py): an arrival sends deck entry `index`; a
    # closed-loop stream the worker's next entry (every `deck_workers`-th from its own).
    deck: Deck | None = None
    deck_workers: int = 1
    # The secrets the parent holds (its API key): a server's error echoing one is masked here,
    # where it is first cut to a line, and not only where it is shown (redaction.py).
    secrets: tuple[str, ...] = field(default_factory=known_secrets)


@dataclass
class WorkerOutput:
    """A worker's records (µs since the common start), loop lag samples and CPU seconds."""

    worker: int
    loop: str
    records: list[RequestRecord] = field(default_factory=list)
    loop_lag_us: list[int] = field(default_factory=list)
    start_late_s: float = 0.0
    run_s: float = 0.0
    cpu_run_s: float = 0.0
    cpu_total_s: float = 0.0
    failure: str | None = None
    stopped_early: str | None = None


def new_loop(prefer_uvloop: bool = True) -> tuple[str, asyncio.AbstractEventLoop]:
    """uvloop when installed (less CPU per read), else asyncio's default loop."""
    if prefer_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return "uvloop", uvloop.new_event_loop()
    return "asyncio", asyncio.new_event_loop()


class Worker:
    """Runs one plan on one loop."""

    def __init__(self, plan: WorkerPlan, loop: asyncio.AbstractEventLoop, loop_name: str) -> None:
        self.plan = plan
        self.loop = loop
        self.output = WorkerOutput(worker=plan.worker, loop=loop_name)
        self.live: list[LiveRecord] = []
        self.idle: list[Connection] = []
        self.tls = ssl.create_default_context() if plan.tls else None
        self.start = 0.0
        self.deadline = 0.0
        self.announced = False
        self.succeeded = 0
        self.failed = 0
        self.slo_stopped = False
        self.done = DoneSlot(plan.done_fd, plan.worker)
        self.serial = 0  # sends of a deck's payloads so far (each its own nonce)

    def next_payload(self, position: int | None) -> tuple[bytes, int | None]:
        """The payload of the next send and its reply length: the plan's one payload, or the
        deck's entry at `position` (None: this worker's next) with a nonce of its own."""
        deck = self.plan.deck
        if deck is None:
            return self.plan.payload, self.plan.max_tokens
        serial = self.serial
        self.serial += 1
        if position is None:
            position = serial * self.plan.deck_workers + self.plan.worker
        return deck.payload(position, self.plan.worker, serial)

    async def connect(self) -> Connection:
        plan = self.plan
        return await open_connection(self.loop, plan.host, plan.port, self.tls, plan.server_name)

    async def run(self, channel_in: IO[bytes], channel_out: IO[bytes]) -> WorkerOutput:
        plan = self.plan
        try:
            streams = [await self.connect() for _ in plan.streams]
            self.idle = [await self.connect() for _ in range(plan.preopen)]
        except OSError as exc:
            why = connect_failure(exc, tls=self.tls is not None)
            self.output.failure = f"cannot connect to {host_port(plan.host, plan.port)}: {why}"
            return self.output
        channel_out.write(READY)
        channel_out.flush()
        self.announced = True
        start_wall: float = receive_message(channel_in)
        self.start = perf_counter_at(start_wall)
        self.deadline = self.start + plan.duration_s
        await sleep_until(self.start)
        self.output.start_late_s = max(0.0, time.perf_counter() - self.start)
        sampler = LagSampler(self.loop, plan.lag_interval_s)
        cpu_before = time.process_time()
        sampler.start()
        gc.disable()  # a collection pass mid-run would show up as a late token
        try:
            if plan.requests_per_stream == 1:
                await self.batch(streams)
            else:
                jobs = [
                    self.closed_stream(s, c) for s, c in zip(plan.streams, streams, strict=True)
                ]
                if plan.arrivals:
                    jobs.append(self.open_loop())
                await asyncio.gather(*jobs)
        finally:
            gc.enable()
            sampler.stop()
        self.output.cpu_run_s = time.process_time() - cpu_before
        self.output.run_s = time.perf_counter() - self.start
        for connection in self.idle:
            connection.close()
        # Replies are held to the model the plan names, else to the earliest reply's: a reply
        # from another model (the server swapped mid-run) is a failure, never a figure.
        expected = plan.expected_model or first_reply_model(self.live)
        for record in self.live:
            check_reply_model(record, expected)
        self.output.records = [record.freeze(self.start) for record in self.live]
        self.output.loop_lag_us = [round(lag * 1e6) for lag in sampler.samples]
        return self.output

    async def batch(self, connections: list[Connection]) -> None:
        """A batch: every stream's request written in one tight loop, so they leave together.

        A coroutine per stream would interleave loop turns between the writes and spread the
        sends over milliseconds; here the only work between two writes is the next write. A
        request that then failed transiently goes out again on its own (`send_with_retries`).
        """
        plan = self.plan
        payloads = plan.stream_payloads or (plan.payload,) * len(plan.streams)
        futures = []
        for stream, connection, payload in zip(plan.streams, connections, payloads, strict=True):
            record = LiveRecord(stream, 0, max_tokens=plan.max_tokens)
            futures.append(connection.send(payload, record, plan.timeout_s, stall_s=plan.stall_s))
        first_tries = await asyncio.gather(*futures)
        retried = [
            self.send_again(record, connection, payloads[position])
            for position, (record, connection) in enumerate(
                zip(first_tries, connections, strict=True)
            )
        ]
        self.live.extend(await asyncio.gather(*retried))
        for connection in connections:
            connection.close()

    async def send_again(
        self, first: LiveRecord, connection: Connection, payload: bytes
    ) -> LiveRecord:
        """The first try's record if it needs no retry, else the retries' (carrying it)."""
        plan = self.plan
        if first.error is None or not first.transient or plan.retry.retries == 0:
            return first
        held = [connection]
        tries = iter([first])

        async def send(record: LiveRecord) -> LiveRecord:
            done = next(tries, None)
            if done is not None:
                return done  # the first try, already sent with the batch
            current = held[0]
            if not current.reusable:
                fresh = await self.connected_or_error(record)
                if fresh is None:
                    return record
                current = held[0] = fresh
            return await self.send_on(current, held, payload, record)

        record = await send_with_retries(
            send, lambda: LiveRecord(first.stream, 0, max_tokens=plan.max_tokens), plan.retry
        )
        if held[0] is not connection:
            held[0].close()
        return record

    async def send_on(
        self, connection: Connection, held: list[Connection], payload: bytes, record: LiveRecord
    ) -> LiveRecord:
        """Send on `connection`, reopened at once if the server had closed it (`reopen.py`);
        `held[0]` becomes the connection the request ended on."""
        plan = self.plan
        record, used = await send_reopening(
            connection, self.connect, payload, record, plan.timeout_s, stall_s=plan.stall_s
        )
        if used is not None:
            held[0] = used
        return record

    async def connected_or_error(self, record: LiveRecord) -> Connection | None:
        """A fresh connection, or None with the failure written into `record`."""
        try:
            return await self.connect()
        except OSError as exc:
            record.send = record.end = time.perf_counter()
            record.error = f"cannot connect: {exc}"
            await asyncio.sleep(RECONNECT_PAUSE_S)
            return None

    async def closed_stream(self, stream: int, connection: Connection | None) -> None:
        """Closed loop: the next request leaves as soon as the previous one has ended."""
        plan = self.plan
        own = plan.stream_payloads
        payload = own[plan.streams.index(stream)] if own else plan.payload
        asked = plan.max_tokens
        limit = plan.requests_per_stream
        index = 0
        held: list[Connection | None] = [connection]

        async def send(record: LiveRecord) -> LiveRecord:
            current = held[0]
            if current is None or not current.reusable:
                if current is not None:  # the server ended it: connecting is not our lag
                    current.close()
                    record.connect_from = time.perf_counter()
                current = held[0] = await self.connected_or_error(record)
                if current is None:
                    return record
            record, used = await send_reopening(
                current, self.connect, payload, record, plan.timeout_s, stall_s=plan.stall_s
            )
            held[0] = used
            return record

        def fresh(number: int) -> Callable[[], LiveRecord]:
            return lambda: LiveRecord(stream, number, max_tokens=asked)

        failures_in_row = 0
        while time.perf_counter() < self.deadline and (limit == 0 or index < limit):
            if plan.deck is not None:  # this request's own bytes (retries send the same)
                payload, asked = self.next_payload(None)
            record = await send_with_retries(send, fresh(index), plan.retry)
            index += 1
            self.keep(record)
            if record.error is None:
                failures_in_row = 0
            elif limit == 0:  # a load run, not a batch: back off before the next request
                pause = min(FAILURE_PAUSE_MAX_S, FAILURE_PAUSE_S * 2**failures_in_row)
                failures_in_row += 1
                await asyncio.sleep(min(pause, max(0.0, self.deadline - time.perf_counter())))
        if held[0] is not None:
            held[0].close()

    def keep(self, record: LiveRecord) -> None:
        """Keep a finished request; stop the worker when nothing has succeeded for too long."""
        self.live.append(record)
        self.done.bump()
        stop = self.plan.slo_stop
        if stop is not None:
            failed = record.error is not None
            missed = misses(stop, failed, record.send, record.arrivals, record.usage_tokens)
            if missed and self.done.miss() > stop.after_misses:
                self.slo_stopped = True
                self.deadline = min(self.deadline, time.perf_counter())
        if record.error is None:
            self.succeeded += 1
            return
        self.failed += 1
        if self.succeeded == 0 and self.failed >= STOP_AFTER_FAILURES:
            if self.output.stopped_early is None:
                self.output.stopped_early = (
                    f"the first {self.failed} requests all failed ({record.error}); stopped "
                    "sending rather than hammer a failing server"
                )
            self.deadline = min(self.deadline, time.perf_counter())

    async def open_loop(self) -> None:
        """Open loop: each arrival is sent at its scheduled instant, whatever is in flight."""
        tasks: list[asyncio.Task[None]] = []
        for index, offset in self.plan.arrivals:
            if self.output.stopped_early is not None or self.slo_stopped:
                break
            due = self.start + offset
            await sleep_until(due)
            tasks.append(self.loop.create_task(self.open_one(index, due)))
        if tasks:
            await asyncio.gather(*tasks)

    async def open_one(self, index: int, due: float) -> None:
        payload, asked = self.next_payload(index)
        record = LiveRecord(-1, index, scheduled=due, max_tokens=asked)
        connection = None
        while self.idle and connection is None:
            candidate = self.idle.pop()
            connection = candidate if candidate.reusable else None
            if connection is None:
                candidate.close()
        if self.output.stopped_early is not None:
            return  # the first requests all failed: the rest of the schedule is not sent
        if connection is None:
            connection = await self.connected_or_error(record)
            if connection is None:
                self.keep(record)
                return
        record, used = await send_reopening(
            connection, self.connect, payload, record, self.plan.timeout_s
        )
        self.keep(record)
        if used is not None and used.reusable:
            self.idle.append(used)


def run_plan(plan: WorkerPlan, channel_in: IO[bytes], channel_out: IO[bytes]) -> None:
    """Run one plan on a fresh loop and send its output (or its failure) to the parent."""
    loop_name, loop = new_loop(plan.prefer_uvloop)
    asyncio.set_event_loop(loop)
    worker = Worker(plan, loop, loop_name)
    try:
        output = loop.run_until_complete(worker.run(channel_in, channel_out))
    except Exception as exc:  # the parent reports it; a traceback helps nobody here
        output = worker.output
        output.failure = f"{type(exc).__name__}: {exc}"
    finally:
        worker.done.close()
        with contextlib.suppress(Exception):
            loop.close()
    output.cpu_total_s = time.process_time()
    if not worker.announced:
        channel_out.write(FAILED)
    send_message(channel_out, output)


def main() -> None:
    """Entry point: for each plan on stdin: `ready`, start instant on stdin, output on stdout.

    The worker serves plans until its stdin closes, so a measurement's batches reuse it.
    """
    die_with_parent()  # a killed parent must not leave this worker sending requests
    channel_in, channel_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but the protocol may reach the parent's pipe
    # Ctrl-C (and a closed terminal's SIGHUP) reach the whole process group; the parent stops
    # the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while True:
        try:
            plan: WorkerPlan = receive_message(channel_in)
        except EOFError:
            return
        for secret in plan.secrets:
            register_secret(secret)
        run_plan(plan, channel_in, channel_out)


if __name__ == "__main__":
    # Run the imported module's main, so pickled classes are sagemeter.transport.worker's own
    # and not this file's second copy under the name __main__.
    from sagemeter.transport.worker import main as module_main

    module_main()
