"""Misbehaviour on purpose, so a client's handling of real servers' habits can be checked.

Every fault is off by default; each one copies something real servers do. "Every Nth" counts the
server's generation requests in the order they arrive (1-based), so a request sent again after a
fault is the next one and, for N > 1, is answered normally. A faulted request keeps the truth's
timing for everything that is not the fault itself, so what a client reports can still be
checked against `TruthTiming`.

- `empty_every`: tokens 1, 1 + N, 1 + 2N, … of every stream carry empty text (vLLM streams
  `"content": ""` for special tokens and for bytes held back until a UTF-8 character is whole).
  They are tokens: the usage count includes them, and the first token's instant is TTFT.
- `reasoning_tokens`: the first R tokens of every chat stream come as `delta.reasoning` (a
  reasoning model's thinking, vLLM 0.32's field), the rest as `delta.content`.
- `fail_every`, `fail_status`, `retry_after_s`: an HTTP error at once instead of a reply, with a
  `Retry-After` header when given.
- `stall_every`, `stall_s`, `stall_after`: the stream pauses `stall_s` after its first
  `stall_after` tokens, then goes on (every later deadline moves by the pause); with
  `stall_after` 0 the pause comes before the first token (a slow prefill).
- `stall_once`: only the Nth generation request stalls so (`stall_s`, `stall_after`), once: a
  server that hiccupped one time, whose every other figure is still the truth.
- `drop_every`, `drop_after`: the connection is closed after `drop_after` tokens of the stream.
- `silent`: requests are read and never answered.
- `die_after`: the server answers N generation requests, then its process exits at the next
  one (a server that crashed mid-measure: every later connection is refused).
- `no_prompt_tokens`: `usage` leaves out `prompt_tokens` (a server that gives no prompt count,
  as some proxies do); prompts still take their prefill time.
- `usage_offset`: every reply's `usage.completion_tokens` says N more tokens than were sent
  (fewer when negative, never below 0): a server whose count lies, which a client must flag.
- `require_key`: a generation request without `Authorization: Bearer KEY` is answered HTTP 401
  (a hosted endpoint's habit), so a client that loses its key anywhere is seen to.
- `echo_key_split`: the first N tokens (N ≥ 2) of every stream carry the request's bearer key,
  split into N pieces, one per `delta.content` event (a server that echoes what it was sent): no
  event holds the whole key, only the joined reply does, so redaction must see the joined text.
  A non-streamed reply's text starts with the whole key.
- `answer`: every generation is answered 200 with an HTML page (`html`) or with JSON that has no
  `choices` (`no-choices`): the server is not a chat API.
- `connection_close`: how kept-alive connections end (`ClosePolicy` in connection.py):
  `always` (`Connection: close` on every reply, then closed), `after-reply` (closed after every
  reply without the header, as llama.cpp's server does) or `on-reuse` (a second request on a
  connection is met by a close before any answer: every reuse is lost, the count is in /stats).
- `swap_model_after`: after N generation requests the server is another model: /v1/models names
  `truth-swapped` and every later reply's `model` field says so (a server replaced mid-measure).
- `restart_after`: after N generation requests the server restarts as the same model (a
  supervisor bringing a crashed engine back): /v1/models is unchanged, but the Prometheus
  `/metrics` page it serves under this fault (`process_start_time_seconds` and a
  `truth_generation_requests_total` counter) shows a later start and a counter begun again.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

ANSWERS = ("", "html", "no-choices")
CONNECTION_CLOSES = ("", "always", "after-reply", "on-reuse")


@dataclass(frozen=True)
class Faults:
    empty_every: int = 0
    reasoning_tokens: int = 0
    fail_every: int = 0
    fail_status: int = 500
    retry_after_s: float | None = None
    stall_every: int = 0
    stall_s: float = 0.0
    stall_after: int = 1
    stall_once: int = 0
    drop_every: int = 0
    drop_after: int = 1
    silent: bool = False
    die_after: int = 0
    usage_offset: int = 0
    no_prompt_tokens: bool = False
    require_key: str = ""
    echo_key_split: int = 0
    answer: Literal["", "html", "no-choices"] = ""
    connection_close: Literal["", "always", "after-reply", "on-reuse"] = ""
    swap_model_after: int = 0
    restart_after: int = 0

    def __post_init__(self) -> None:
        for name in (
            "empty_every",
            "reasoning_tokens",
            "fail_every",
            "stall_every",
            "stall_once",
            "drop_every",
            "swap_model_after",
            "restart_after",
            "echo_key_split",
            "die_after",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more")
        if not 400 <= self.fail_status <= 599:
            raise ValueError("fail_status must be an HTTP error status (400–599)")
        if self.echo_key_split == 1:
            raise ValueError("echo_key_split must be 0 (off) or at least 2 pieces")
        if self.stall_s < 0 or self.stall_after < 0 or self.drop_after < 1:
            raise ValueError("stall_s and stall_after must be 0 or more; drop_after at least 1")
        if self.answer not in ANSWERS:
            raise ValueError(f"answer must be one of {ANSWERS}")
        if self.connection_close not in CONNECTION_CLOSES:
            choices = ", ".join(c for c in CONNECTION_CLOSES if c)
            raise ValueError(f"connection_close must be one of {choices}")

    @property
    def any(self) -> bool:
        return self != Faults()

    def args(self) -> list[str]:
        """The faults as command-line flags of `python -m sagemeter.calibrate.server`."""
        flags = []
        for item in fields(self):
            value = getattr(self, item.name)
            if value == item.default:
                continue
            flag = "--" + item.name.replace("_", "-")
            flags.append(flag if value is True else f"{flag}={value}")
        return flags


def swapped(faults: Faults, generations: int) -> bool:
    """Whether the server is the other model by now (`generations` requests have arrived)."""
    return faults.swap_model_after > 0 and generations > faults.swap_model_after


def restarted(faults: Faults, generations: int) -> bool:
    """Whether the server has restarted by now (`generations` requests have arrived)."""
    return faults.restart_after > 0 and generations > faults.restart_after


def nth(every: int, number: int) -> bool:
    """Whether the `number`-th request (1-based) is one of every `every`-th (0: never)."""
    return every > 0 and number % every == 0
