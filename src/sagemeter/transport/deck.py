"""A load run's request bodies when they differ: a deck of ready payloads, each made unique.

A synthetic workload draws a few thousand (prompt length, reply length) pairs; sending the same
prompt twice would let a prefix cache serve it, so each send stamps a nonce of its own into the
payload's first words: a fixed-width run of three-letter words (each one token for common
tokenizers, the same count for every value), written in place so the body's length, and the
Content-Length, stay the same. A trace's payloads are sent as built (their shared prefixes are
the point); their nonce offset is -1. Worker-side: plain bytes, no pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass

# Sixteen common three-letter words: a nonce digit each (hexadecimal in words).
NONCE_DIGITS = (
    b"the", b"ran", b"old", b"and", b"sat", b"dog", b"had", b"for",
    b"day", b"sun", b"red", b"sky", b"sea", b"top", b"cup", b"map",
)  # fmt: skip
RUN_WORDS = 4  # written by the parent: a random run id, so no run's prompts meet another's
WORKER_WORDS = 2
SERIAL_WORDS = 6
NONCE_WORDS = RUN_WORDS + WORKER_WORDS + SERIAL_WORDS
STAMP_OFFSET = RUN_WORDS * 4  # bytes of the run part ("the " per word)


def digits(value: int, count: int) -> bytes:
    """`value` as `count` base-16 digit words, space-separated, each followed by a space."""
    out = []
    for _ in range(count):
        out.append(NONCE_DIGITS[value & 0xF])
        value >>= 4
    return b"".join(word + b" " for word in reversed(out))


def nonce_text(run: int) -> str:
    """The nonce placeholder a payload's prompt starts with: the run's words, zeros after."""
    return (digits(run, RUN_WORDS) + digits(0, WORKER_WORDS + SERIAL_WORDS)).decode().rstrip()


@dataclass(frozen=True)
class Deck:
    """Payloads, the reply length each asks, and where each one's nonce starts (-1: none)."""

    payloads: tuple[bytes, ...]
    max_tokens: tuple[int, ...]
    nonce_at: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.payloads)

    def payload(self, position: int, worker: int, serial: int) -> tuple[bytes, int]:
        """The payload at `position` (wrapping), stamped for this worker's `serial`-th send,
        and its reply length."""
        at = position % len(self.payloads)
        payload = self.payloads[at]
        offset = self.nonce_at[at]
        if offset >= 0:
            start = offset + STAMP_OFFSET
            stamp = digits(worker, WORKER_WORDS) + digits(serial, SERIAL_WORDS)
            # The last digit's trailing space is the prompt's own space before its next word.
            payload = payload[:start] + stamp + payload[start + len(stamp) :]
        return payload, self.max_tokens[at]
