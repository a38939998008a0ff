"""The Poisson schedule is seeded and reproducible; shards and workers split load exactly."""

from __future__ import annotations

import itertools

import pytest

from sagemeter.errors import UserError
from sagemeter.loadgen.schedule import (
    parse_shard,
    poisson_schedule,
    shard_arrivals,
    split_count,
)


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    first = poisson_schedule(50.0, 20.0, seed=7)
    assert first == poisson_schedule(50.0, 20.0, seed=7)
    assert first != poisson_schedule(50.0, 20.0, seed=8)
    assert first == sorted(first)
    assert first[0] > 0 and first[-1] < 20.0


def test_schedule_has_the_asked_rate() -> None:
    arrivals = poisson_schedule(100.0, 100.0, seed=1)
    # 10,000 expected; a Poisson count's standard deviation is 100, so ±5σ.
    assert 9_500 < len(arrivals) < 10_500
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert abs(sum(gaps) / len(gaps) - 0.01) < 0.0005


@pytest.mark.parametrize("shards", [1, 2, 3, 5])
def test_shards_cover_every_arrival_exactly_once(shards: int) -> None:
    schedule = poisson_schedule(30.0, 10.0, seed=3)
    taken = [
        arrival for shard in range(shards) for arrival in shard_arrivals(schedule, shards, shard)
    ]
    assert sorted(taken) == list(enumerate(schedule))
    for shard in range(shards):
        assert all(index % shards == shard for index, _ in shard_arrivals(schedule, shards, shard))


@pytest.mark.parametrize(("total", "parts"), [(16, 2), (7, 3), (5, 5), (130, 4), (3, 1)])
def test_split_count_covers_the_range_with_the_remainder_first(total: int, parts: int) -> None:
    slices = [split_count(total, parts, part) for part in range(parts)]
    assert [i for part in slices for i in part] == list(range(total))
    sizes = [len(part) for part in slices]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)


def test_shard_text() -> None:
    assert parse_shard("0/2") == (0, 2)
    assert parse_shard("2/3") == (2, 3)
    for bad in ("3/2", "2/2", "-1/2", "a/b", "1", "0/0", "1/"):
        with pytest.raises(UserError, match="--shard"):
            parse_shard(bad)


def test_bad_rate_is_a_user_error() -> None:
    for rate in (0.0, -1.0):
        with pytest.raises(UserError, match="--rate"):
            poisson_schedule(rate, 10.0, seed=0)
