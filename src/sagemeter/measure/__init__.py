"""Measurements: what is done to an endpoint. Each takes a ChatClient and returns plain data."""

from collections.abc import Callable

# Called with the number of requests just finished, so a face can advance a progress bar.
ProgressFn = Callable[[int], None]


def no_progress(_: int) -> None:
    """The default progress callback: nobody is watching."""
