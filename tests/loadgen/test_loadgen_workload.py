"""Real workloads for `sagemeter load`: a Mooncake trace replayed, drawn lengths, gamma arrivals.

Against the known-truth server, which counts a prompt's tokens as its words plus 3 template
tokens, caches prompts in blocks of 16 tokens (vLLM's rule) and logs each request's true
arrival (the kernel's stamp): a trace's requests arrive at their times, each with the reply
length asked and the prompt length the trace says as the server counts it, and requests that
share hash ids share that prefix exactly (the cache serves it). Bad traces and bad
distributions are one line and exit 2 before anything is sent.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.errors import UserError
from sagemeter.loadgen.lengths import parse_lengths
from sagemeter.loadgen.schedule import gamma_schedule, poisson_schedule
from sagemeter.loadgen.trace import BLOCK_TOKENS, read_trace
from sagemeter.transport.deck import NONCE_WORDS, Deck, nonce_text
from tests import cli_run

TIMING = TruthTiming(ttft_s=0.01, itl_s=0.002, prefix_cache=True)
NOTHING = "http://127.0.0.1:9"
CACHE_BLOCK = 16  # the truth server's prefix-cache block
TEMPLATE = 3  # the truth server's chat-template tokens


def _load(
    args: list[str], env: dict[str, str], cwd: Path, *, real_process: bool = False
) -> tuple[int, str, str]:
    """`sagemeter load ARGS` in this process, or as its own process for a timed rate search."""
    run_cli = cli_run.run if real_process else cli_run.invoke
    done = run_cli(["load", *args], {**env, "COLUMNS": "200", "SAGEMETER_PROGRESS": "0"}, cwd)
    return done.returncode, done.stdout, done.stderr


def _ran(code: int, stderr: str) -> None:
    """The run finished: valid, or judged invalid only because this shared machine's client
    fell behind (exit 3, the result still written): what these tests check is what was sent."""
    client = (
        "the client could not keep up",
        "sends were late against the schedule",
        "the client took",
    )
    assert code == 0 or (code == 3 and any(why in stderr for why in client)), stderr


def _write_trace(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _shared_trace(count: int, rate: float, seed: int) -> list[dict[str, object]]:
    """Every third request a fresh prompt; the others share the leading blocks [1, 2] (and some
    [1, 2, 3]), each with a tail block of its own. Written out of order (the reader sorts)."""
    draw = random.Random(seed)
    rows: list[dict[str, object]] = []
    at = 0.0
    for index in range(count):
        at += draw.expovariate(rate) * 1000
        kind = index % 3
        if kind == 0:
            ids, length = [1000 + index], 300 + index
        elif kind == 1:
            ids, length = [1, 2, 2000 + index], 2 * BLOCK_TOKENS + 100
        else:
            ids, length = [1, 2, 3, 3000 + index], 3 * BLOCK_TOKENS + 7
        rows.append(
            {
                "timestamp": round(at, 3),
                "input_length": length,
                "output_length": 3 + index % 5,
                "hash_ids": ids,
            }
        )
    rows.reverse()
    return rows


def _expected_cached(rows: list[dict[str, object]]) -> list[int]:
    """The truth server's cached tokens per request in time order: the leading ids shared with
    an earlier request, whole cache blocks of them (the template's 3 tokens lead)."""
    ordered = sorted(rows, key=lambda row: float(row["timestamp"]))  # type: ignore[arg-type]
    seen: list[list[int]] = []
    cached = []
    for row in ordered:
        ids = list(row["hash_ids"])  # type: ignore[call-overload]
        shared = 0
        for earlier in seen:
            common = 0
            while common < min(len(ids), len(earlier)) and ids[common] == earlier[common]:
                common += 1
            shared = max(shared, common)
        seen.append(ids)
        tokens = TEMPLATE + shared * BLOCK_TOKENS
        cached.append(tokens // CACHE_BLOCK * CACHE_BLOCK if shared else 0)
    return cached


def test_a_trace_replays_at_its_times_lengths_and_shared_prefixes(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    rows = _shared_trace(40, rate=20.0, seed=3)
    trace = tmp_path / "trace.jsonl"
    _write_trace(trace, rows)
    out, log = tmp_path / "replay.json", tmp_path / "arrivals.jsonl"
    with running_truth_server(TIMING, arrival_log=log) as url:
        code, stdout, stderr = _load(
            [url, f"--trace={trace}", "--raw", "--workers=1", f"--out={out}"],
            sagemeter_env,
            tmp_path,
        )
    assert code == 0, stderr
    result = json.loads(out.read_text())
    assert result["mode"] == "trace"
    ordered = sorted(rows, key=lambda row: float(row["timestamp"]))  # type: ignore[arg-type]
    records = sorted(result["raw"]["records"], key=lambda r: r["index"])
    assert len(records) == len(rows) and all(r["error"] is None for r in records)
    start_ms = float(ordered[0]["timestamp"])  # type: ignore[arg-type]
    for record, row in zip(records, ordered, strict=True):
        assert record["scheduled_us"] == round((float(row["timestamp"]) - start_ms) * 1000)  # type: ignore[arg-type]
        assert record["max_tokens"] == row["output_length"]
        assert record["usage_tokens"] == row["output_length"]  # ignore_eos: the length asked
        # The server counts words + 3; the text was sized from its own count: exact here.
        assert record["prompt_tokens"] == row["input_length"]
    # Shared hash ids are shared prefixes, word for word: the cache served exactly them.
    cached = [r["cached_prompt_tokens"] for r in records]
    assert cached == _expected_cached(rows)
    assert sum(cached) > 0
    work = result["workload"]
    assert work["kind"] == "trace" and work["trace_requests"] == 40
    assert work["requests_scheduled"] == 40
    assert work["unique_blocks"] == 3 + 40  # [1, 2, 3] and one tail block each
    assert work["input_off_by_tokens"]["max"] == 0
    assert work["cached_input_tokens"] == sum(cached)
    assert work["sizing"]["tokens_per_word"] == pytest.approx(1.0)
    assert work["sizing"]["overhead_tokens"] == pytest.approx(TEMPLATE)
    # The server's own arrival stamps (after the two sizing probes) against the schedule.
    arrived = [json.loads(line)["arrived_unix"] for line in log.read_text().splitlines()]
    assert len(arrived) == 2 + len(rows)
    wall_start = result["raw"]["wall_start"]
    late = [
        stamp - (wall_start + record["scheduled_us"] * 1e-6)
        for stamp, record in zip(arrived[2:], records, strict=True)
    ]
    assert min(late) > -0.002  # never before its time (clock reads aside)
    assert statistics.median(late) < 0.01
    assert max(late) < 0.1  # a shared 2-core machine; the figures are in the report
    lateness = work["schedule_lateness_s"]
    assert lateness["n"] == len(rows) and lateness["max"] >= lateness["p99"] >= lateness["median"]
    assert "sends late against the schedule" in stdout


def test_trace_speed_scales_the_times_and_duration_cuts_the_trace(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    rows = [{"timestamp": ms, "input_length": 20, "output_length": 2} for ms in range(0, 2000, 100)]
    trace = tmp_path / "even.jsonl"
    _write_trace(trace, rows)
    out = tmp_path / "fast.json"
    with running_truth_server(TIMING) as url:
        code, _, stderr = _load(
            [
                url,
                f"--trace={trace}",
                "--trace-speed=4",
                "--duration=0.3s",
                "--raw",
                f"--out={out}",
            ],
            sagemeter_env,
            tmp_path,
        )
    _ran(code, stderr)
    result = json.loads(out.read_text())
    scheduled = sorted(r["scheduled_us"] for r in result["raw"]["records"])
    assert scheduled == [
        0,
        25_000,
        50_000,
        75_000,
        100_000,
        125_000,
        150_000,
        175_000,
        200_000,
        225_000,
        250_000,
        275_000,
        300_000,
    ]
    assert result["workload"]["requests_scheduled"] == 13
    assert result["workload"]["block_reuses"] == 0


BAD_TRACES = [
    ("not json", "{nope\n", "line 1: not JSON"),
    ("a list", "[1, 2]\n", "line 1: not a JSON object"),
    ("missing", '{"timestamp": 0, "input_length": 5}\n', "line 1: missing output_length"),
    (
        "negative time",
        '{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
        '{"timestamp": -4, "input_length": 5, "output_length": 1}\n',
        "line 2: `timestamp` -4 is negative",
    ),
    (
        "negative length",
        '{"timestamp": 0, "input_length": -5, "output_length": 1}\n',
        "`input_length` -5 is out of",
    ),
    (
        "fractional",
        '{"timestamp": 0, "input_length": 5, "output_length": 1.5}\n',
        "`output_length` must be a whole number",
    ),
    (
        "bad ids",
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["a"]}\n',
        "`hash_ids` must be a list",
    ),
    ("empty", "\n\n", "holds no request"),
]


@pytest.mark.parametrize(
    ("text", "expected"), [case[1:] for case in BAD_TRACES], ids=[c[0] for c in BAD_TRACES]
)
def test_a_bad_trace_is_one_line_and_exit_2_before_any_work(
    tmp_path: Path, sagemeter_env: dict[str, str], text: str, expected: str
) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text(text)
    code, _, stderr = _load([NOTHING, f"--trace={trace}"], sagemeter_env, tmp_path)
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], stderr
    assert "Traceback" not in stderr and "connect" not in stderr


def test_unsorted_trace_lines_are_sorted_and_shifted_to_start_at_zero(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    _write_trace(
        trace,
        [
            {"timestamp": 900, "input_length": 7, "output_length": 2},
            {"timestamp": 500, "input_length": 9, "output_length": 3, "hash_ids": [4]},
        ],
    )
    read = read_trace(trace)
    assert [(r.at_s, r.input_tokens, r.hash_ids) for r in read.requests] == [
        (0.0, 9, (4,)),
        (0.4, 7, ()),
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--trace={trace}", "--rate=3"], "leave out --rate"),
        (["--trace={trace}", "--search=rate", "--rate=1", "--slo-ttft=1s"], "leave out"),
        (["--trace={trace}", "--trace-speed=0"], "--trace-speed 0.0: give a positive"),
        (["--trace-speed=2"], "give --trace too"),
        (["--trace={missing}"], "cannot read it"),
        (["--input-tokens=normal:10"], "--input-tokens 'normal:10': give fixed:N"),
        (["--output-tokens=uniform:9,3"], "1 ≤ A ≤ B"),
        (["--input-tokens=fixed:0"], "from 1 to"),
        (["--rate=2", "--burstiness=0"], "--burstiness 0.0: give a positive"),
        (["--burstiness=0.5"], "give --rate too"),
        (["--trace={trace}", "--shard=0/2"], "leave out --shard"),
        (["--input-tokens=fixed:9", "--prompt=hi"], "give one of them"),
        (["--input-tokens=fixed:9", "--ray=local"], "leave out --ray"),
    ],
)
def test_bad_workload_options_are_one_line_and_exit_2(
    tmp_path: Path, sagemeter_env: dict[str, str], args: list[str], expected: str
) -> None:
    trace = tmp_path / "ok.jsonl"
    _write_trace(trace, [{"timestamp": 0, "input_length": 5, "output_length": 1}])
    filled = [a.format(trace=trace, missing=tmp_path / "none.jsonl") for a in args]
    code, _, stderr = _load([NOTHING, *filled], sagemeter_env, tmp_path)
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], stderr


@pytest.mark.parametrize(
    ("spec", "mean", "sd"),
    [
        ("fixed:128", 128.0, 0.0),
        ("uniform:100,300", 200.0, math.sqrt((201**2 - 1) / 12)),
        ("normal:500,100", 500.0, 100.0),
        ("lognormal:400,200", 400.0, 200.0),
    ],
)
def test_drawn_lengths_have_the_mean_and_spread_asked(spec: str, mean: float, sd: float) -> None:
    lengths = parse_lengths(spec, "--input-tokens").sample(20_000, "7:input")
    assert lengths == parse_lengths(spec, "--input-tokens").sample(20_000, "7:input")  # seeded
    assert min(lengths) >= 1 and all(isinstance(n, int) for n in lengths)
    assert statistics.fmean(lengths) == pytest.approx(mean, rel=0.02)
    assert statistics.pstdev(lengths) == pytest.approx(sd, rel=0.05, abs=0.01)


def test_normal_lengths_below_one_token_are_drawn_again() -> None:
    lengths = parse_lengths("normal:3,5", "--output-tokens").sample(2000, 1)
    assert min(lengths) >= 1


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_arrivals_keep_the_rate_and_shape_the_gaps(burstiness: float) -> None:
    arrivals = gamma_schedule(50.0, 400.0, 11, burstiness)
    assert len(arrivals) / 400.0 == pytest.approx(50.0, rel=0.05)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.05)
    if burstiness == 1.0:
        assert arrivals == poisson_schedule(50.0, 400.0, 11)


def test_a_deck_stamps_each_send_with_its_own_nonce_of_the_same_length() -> None:
    nonce = nonce_text(0xBEEF)
    assert len(nonce.split()) == NONCE_WORDS
    body = f'{{"prompt":"{nonce} river ran"}}'.encode()
    deck = Deck((body,), (9,), (body.find(nonce.encode()),))
    sent = {deck.payload(0, worker, serial)[0] for worker in range(3) for serial in range(50)}
    assert len(sent) == 150  # every send unique
    for payload in sent:
        assert len(payload) == len(body)
        text = json.loads(payload)["prompt"]
        assert text.startswith(" ".join(nonce.split()[:4]))  # the run's words stay
        assert text.endswith(" river ran") and len(text.split()) == NONCE_WORDS + 2
    assert deck.payload(1, 0, 0)[1] == 9


def test_drawn_lengths_arrive_as_asked_by_the_servers_count(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    out = tmp_path / "drawn.json"
    with running_truth_server(TIMING) as url:
        code, stdout, stderr = _load(
            [
                url,
                "--rate=40",
                "--burstiness=0.5",
                "--duration=1.5s",
                "--input-tokens=uniform:40,400",
                "--output-tokens=normal:12,4",
                "--seed=5",
                "--raw",
                f"--out={out}",
            ],
            sagemeter_env,
            tmp_path,
        )
    _ran(code, stderr)
    result = json.loads(out.read_text())
    records = result["raw"]["records"]
    work = result["workload"]
    assert work["kind"] == "synthetic" and work["burstiness"] == 0.5 and work["seed"] == 5
    assert work["input_tokens"] == "uniform:40,400" and work["output_tokens"] == "normal:12,4"
    asked_in = parse_lengths("uniform:40,400", "x").sample(work["shapes"], "5:input")
    asked_out = parse_lengths("normal:12,4", "x").sample(work["shapes"], "5:output")
    for record in records:
        assert record["error"] is None
        assert record["prompt_tokens"] == asked_in[record["index"]]
        assert record["max_tokens"] == record["usage_tokens"] == asked_out[record["index"]]
    assert work["input_off_by_tokens"]["max"] == 0
    # Every prompt unique from its first words: the prefix cache served none of them.
    assert work["cached_input_tokens"] == 0
    assert "workload: input uniform:40,400" in stdout


def test_drawn_lengths_in_a_closed_loop_are_each_unique(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    out = tmp_path / "closed.json"
    with running_truth_server(TIMING) as url:
        code, _, stderr = _load(
            [
                url,
                "--concurrency=4",
                "--duration=0.6s",
                "--input-tokens=fixed:64",
                "--output-tokens=uniform:20,40",
                "--raw",
                f"--out={out}",
            ],
            sagemeter_env,
            tmp_path,
        )
    _ran(code, stderr)
    result = json.loads(out.read_text())
    records = result["raw"]["records"]
    assert len(records) > 12
    assert {r["prompt_tokens"] for r in records} == {64}
    assert all(20 <= r["usage_tokens"] == r["max_tokens"] <= 40 for r in records)
    assert result["workload"]["cached_input_tokens"] == 0


@pytest.mark.slow
def test_the_rate_search_takes_drawn_lengths(tmp_path: Path, sagemeter_env: dict[str, str]) -> None:
    """One slot, prompts of 200 tokens at 0.1 ms each and replies of 4 tokens: a request holds
    the slot 10 + 20 + 8 = 38 ms, so no rate above 1/0.038 ≈ 26 per second can hold TTFT."""
    timing = TruthTiming(ttft_s=0.01, itl_s=0.002, prefill_s=0.0001)
    out = tmp_path / "search.json"
    with running_truth_server(timing, slots=1) as url:
        code, _, stderr = _load(
            [
                url,
                "--search=rate",
                "--rate=12",  # half the ~22/s it ends at: no 8/s probe waiting 1.3 s
                "--slo-ttft=60ms",
                "--slo-percentile=50",
                "--duration=0.5s",
                "--input-tokens=fixed:200",
                "--output-tokens=fixed:4",
                "--workers=1",
                f"--out={out}",
            ],
            sagemeter_env,
            tmp_path,
            real_process=True,
        )
    assert code == 0, stderr
    result = json.loads(out.read_text())
    point = result["operating_point"]
    assert point is not None and 12 <= point["rate"] < 1 / 0.038
    assert any(not probe["passed"] for probe in result["slo_search"]["probes"])
    # The point's probe sent the drawn lengths, as the server counted them.
    assert result["workload"]["counted_input_tokens"]["median"] == 200
    assert result["workload"]["asked_output_tokens"]["median"] == 4
    assert result["ttft_s"]["median"] >= timing.first_token_seconds(200)


def test_read_trace_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--trace .*nowhere\.jsonl: no such file$"):
        read_trace(tmp_path / "nowhere.jsonl")


def test_a_plans_slo_search_sends_the_drawn_lengths() -> None:
    """`[slo] input_tokens = "fixed:30"`: besides the sizing probes every generation request the
    server saw had a 30-token prompt."""
    import httpx

    from sagemeter.measure.slo import search_slo
    from sagemeter.options.slo import SloOptions

    options = SloOptions(
        ttft=0.035,
        percentile=50.0,
        search="concurrency",
        concurrency=2,
        duration=0.3,
        input_tokens="fixed:30",
        output_tokens="fixed:4",
    )
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.002), slots=1) as url:
        figures = search_slo(url, options, None)
        stats = httpx.get(url + "/stats", timeout=5).json()
    assert figures.slo_search is not None and figures.slo_search["probes"]
    # One sizing pair, then one check of the first length per later probe run (k of them);
    # every other generation request had a 30-token prompt.
    sized, check = (64 + TEMPLATE) + (576 + TEMPLATE), 64 + TEMPLATE
    rest = stats["prompt_tokens"] - sized - 30 * (stats["generation_requests"] - 2)
    checks, left = divmod(rest, check - 30)
    assert left == 0 and 1 <= checks <= len(figures.slo_search["probes"]) * 3
    with pytest.raises(ValueError, match="normal:3"):
        SloOptions(ttft=0.5, input_tokens="normal:3")


async def test_the_mcp_search_tool_checks_its_lengths_before_any_work(tmp_path: Path) -> None:
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line

    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        refused = await client.call_tool(
            "find_operating_point",
            {"target": NOTHING, "name": "x", "slo_ttft_ms": 100, "input_tokens": "normal:3"},
        )
    assert refused.is_error
    assert "'normal:3': give fixed:N" in error_line(refused)


def test_shared_hash_ids_are_the_same_words_and_then_differ() -> None:
    from sagemeter.loadgen.prompt_text import Sizing, block_prompt

    sizing = Sizing(overhead=3.0, per_word=1.0)
    first = block_prompt(sizing, [1, 2, 5], 1200, BLOCK_TOKENS, 0, own="a").split()
    second = block_prompt(sizing, [1, 2, 6], 1100, BLOCK_TOKENS, 0, own="b").split()
    other_seed = block_prompt(sizing, [1, 2, 5], 1200, BLOCK_TOKENS, 1, own="a").split()
    assert (len(first), len(second)) == (1200 - 3, 1100 - 3)
    shared = 2 * BLOCK_TOKENS
    assert first[:shared] == second[:shared]
    # The third blocks differ from their first words on (16-word runs, as a cache block sees).
    assert first[shared : shared + 16] != second[shared : shared + 16]
    assert first[:16] != other_seed[:16]  # --seed changes every block's text
