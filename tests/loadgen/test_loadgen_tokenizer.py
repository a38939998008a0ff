"""`load --tokenizer`: prompts cut to exact lengths by the model's own tokenizer.

Truth: a tokenizer's count of the text it cut (the cut must be exact whatever words are long);
the known-truth server, which counts words + 3 template tokens, with a tokenizer spelling every
prompt word as one token (its count is the server's, so every request counts exactly what the
trace asks) and with one spelling long words in bytes (it is not the server's tokenizer: two
probes disagree, one line, exit 2); and real llama.cpp (the embedded engine, SmolLM2's own
tokenizer) given the GGUF it serves: every request's usage.prompt_tokens is the length asked.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.loadgen.prompt_text import VOCABULARY, ExactSizing, block_prompt, own_prompt
from sagemeter.prompt_tokenizer import BYTES, load_tokenizer
from sagemeter.transport.deck import NONCE_DIGITS, nonce_text
from tests import cli_run

TIMING = TruthTiming(ttft_s=0.005, itl_s=0.001, prefix_cache=True)
NOTHING = "http://127.0.0.1:9"
TEMPLATE = 3  # the truth server's chat-template tokens


def words_tokenizer(folder: Path, longest: int) -> Path:
    """A byte-level BPE tokenizer.json spelling each prompt and nonce word of at most `longest`
    letters as one token, with or without a space before it; longer words stay in bytes."""
    vocab = {char: index for index, char in enumerate(BYTES.values())}
    merges: list[str] = []
    spelled = {w for w in VOCABULARY if len(w) <= longest} | {w.decode() for w in NONCE_DIGITS}
    # Every spaced word's merges rank before any unspaced one's, so no chain cuts another.
    for space in (BYTES[ord(" ")], ""):
        for word in sorted(spelled):
            built = space + word[0]
            if built not in vocab:
                merges.append(" ".join(built))
                vocab[built] = len(vocab)
            for char in word[1:]:
                if f"{built} {char}" not in merges:
                    merges.append(f"{built} {char}")
                built += char
                vocab.setdefault(built, len(vocab))
    # Unspaced chains can cut one another ("and" before "ran"): join what is left, ranked last.
    for word in sorted(spelled):
        parts = _bpe(list(word), merges)
        while len(parts) > 1:
            merges.append(f"{parts[0]} {parts[1]}")
            parts = [parts[0] + parts[1], *parts[2:]]
            vocab.setdefault(parts[0], len(vocab))
    spec = {
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder


def _bpe(parts: list[str], merges: list[str]) -> list[str]:
    """`parts` merged by rank, as BPE does (the lowest-ranked pair first)."""
    ranks = {merge: rank for rank, merge in reversed(list(enumerate(merges)))}
    while True:
        ranked = [
            (ranks[f"{a} {b}"], i)
            for i, (a, b) in enumerate(itertools.pairwise(parts))
            if f"{a} {b}" in ranks
        ]
        if not ranked:
            return parts
        _, at = min(ranked)
        parts[at : at + 2] = [parts[at] + parts[at + 1]]


def _load(
    args: list[str], env: dict[str, str], cwd: Path, *, real_process: bool = False
) -> tuple[int, str, str]:
    """`sagemeter load ARGS` in this process, or as its own process (the slow real-engine run)."""
    run_cli = cli_run.run if real_process else cli_run.invoke
    done = run_cli(["load", *args], {**env, "COLUMNS": "200", "SAGEMETER_PROGRESS": "0"}, cwd)
    return done.returncode, done.stdout, done.stderr


def _ran(code: int, stderr: str) -> None:
    """Done: valid, or judged invalid (exit 3, the result still written) only because this
    shared machine's client fell behind; what these tests check is what was sent."""
    late = ("the client could not keep up", "sends were late", "the client took")
    assert code == 0 or (code == 3 and any(why in stderr for why in late)), stderr


def _trace(path: Path, lengths: list[int]) -> Path:
    """Requests 50 ms apart; odd ones share the leading block [7] (a shared prefix)."""
    rows = [
        {
            "timestamp": 50 * i,
            "input_length": length,
            "output_length": 2,
            "hash_ids": [7, 100 + i] if i % 2 else [100 + i],
        }
        for i, length in enumerate(lengths)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_cut_is_exact_by_the_tokenizer_whatever_the_words(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(words_tokenizer(tmp_path / "tok", longest=4))
    assert tokenizer.count(" river") > 1 and tokenizer.count(" the") == 1  # long words: pieces
    sizing = ExactSizing(tokenizer, overhead=5)
    for asked in (6, 7, 40, 511, 518, 1300):
        text = block_prompt(sizing, [1, 2], asked, 512, seed=0, own="a")
        assert tokenizer.count(text) == asked - 5
        nonce = nonce_text(0xBEEF)
        own = own_prompt(sizing, asked + 20, nonce, seed=str(asked))
        assert own.startswith(nonce) and tokenizer.count(own) == asked + 20 - 5
    # A shared block is the same words in every prompt that leads with it.
    first = block_prompt(sizing, [1, 2], 1100, 512, seed=0, own="a")
    second = block_prompt(sizing, [1, 3], 1100, 512, seed=0, own="b")
    shared = len(sizing.block("0:block:1", 512))
    assert first.split()[:shared] == second.split()[:shared]
    assert first.split()[shared : shared + 20] != second.split()[shared : shared + 20]


def test_with_the_servers_tokenizer_every_request_counts_as_asked(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    lengths = [9, 40, 333, 600, 517, 64]
    trace = _trace(tmp_path / "trace.jsonl", lengths)
    folder = words_tokenizer(tmp_path / "tok", longest=99)
    out = tmp_path / "out.json"
    with running_truth_server(TIMING) as url:
        code, stdout, stderr = _load(
            [url, f"--trace={trace}", f"--tokenizer={folder}", "--raw", f"--out={out}"],
            sagemeter_env,
            tmp_path,
        )
    _ran(code, stderr)
    result = json.loads(out.read_text())
    records = sorted(result["raw"]["records"], key=lambda r: r["index"])
    assert [r["prompt_tokens"] for r in records] == lengths
    sizing = result["workload"]["sizing"]
    assert sizing["counter"] == "tokenizer" and sizing["tokenizer"] == "tokenizer.json of tok"
    assert sizing["overhead_tokens"] == TEMPLATE
    assert result["workload"]["input_off_by_tokens"]["max"] == 0
    assert "cut exactly by the tokenizer" in stdout


def test_drawn_lengths_are_cut_by_the_tokenizer_too(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    folder = words_tokenizer(tmp_path / "tok", longest=99)
    out = tmp_path / "out.json"
    with running_truth_server(TIMING) as url:
        code, _, stderr = _load(
            [
                url,
                "--input-tokens=uniform:20,400",
                "--rate=40",
                "--duration=0.5s",
                "--max-tokens=2",
                f"--tokenizer={folder}",
                f"--out={out}",
            ],
            sagemeter_env,
            tmp_path,
        )
    _ran(code, stderr)
    work = json.loads(out.read_text())["workload"]
    assert work["sizing"]["counter"] == "tokenizer"
    assert work["input_off_by_tokens"]["n"] > 5 and work["input_off_by_tokens"]["max"] == 0


def test_a_tokenizer_that_is_not_the_servers_is_one_line_and_exit_2(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    trace = _trace(tmp_path / "trace.jsonl", [50, 60])
    folder = words_tokenizer(tmp_path / "other", longest=3)  # longer words: bytes, not words
    with running_truth_server(TIMING) as url:
        code, _, stderr = _load(
            [url, f"--trace={trace}", f"--tokenizer={folder}"], sagemeter_env, tmp_path
        )
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "does not count as the server does" in lines[0], stderr


@pytest.mark.parametrize(
    ("given", "extra", "expected"),
    [
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "trace", "never downloads a tokenizer"),
        ("{tmp}/missing.gguf", "trace", "no such file or folder"),
        ("{tmp}", "trace", "tokenizer.json"),  # a folder without one
        ("{tok}", "none", "give one"),  # nothing to size
    ],
)
def test_a_bad_tokenizer_is_one_line_and_exit_2_before_any_work(
    tmp_path: Path, sagemeter_env: dict[str, str], given: str, extra: str, expected: str
) -> None:
    trace = _trace(tmp_path / "trace.jsonl", [50])
    tok = words_tokenizer(tmp_path / "tok", longest=99)
    args = [NOTHING, f"--tokenizer={given.format(tmp=tmp_path, tok=tok)}"]
    if extra == "trace":
        args.append(f"--trace={trace}")
    code, _, stderr = _load(args, sagemeter_env, tmp_path)
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], stderr
    assert "Traceback" not in stderr and "connect" not in stderr


@pytest.mark.slow  # the embedded engine (shared by the session) and the GGUF's vocabulary
def test_real_llama_cpp_counts_every_prompt_as_asked_with_its_gguf(
    tmp_path: Path, sagemeter_env: dict[str, str], engine_url: str, q4_path: Path
) -> None:
    lengths = [48, 517, 700, 77]  # the engine holds 1024 a slot
    trace = _trace(tmp_path / "trace.jsonl", lengths)
    out = tmp_path / "out.json"
    code, _, stderr = _load(
        [engine_url, f"--trace={trace}", f"--tokenizer={q4_path}", "--raw", f"--out={out}"],
        sagemeter_env,
        tmp_path,
        real_process=True,
    )
    # Four requests have no steady part to take figures from (exit 3 says so, the result still
    # written): what this test checks is what was sent and how the engine counted it.
    if "no steady window" in stderr:
        assert code == 3, stderr
    else:
        _ran(code, stderr)
    result = json.loads(out.read_text())
    records = sorted(result["raw"]["records"], key=lambda r: r["index"])
    assert all(r["error"] is None for r in records), [
        (r["error"], r["prompt_tokens"]) for r in records
    ]
    assert [r["prompt_tokens"] for r in records] == lengths  # llama.cpp's own count
    sizing = result["workload"]["sizing"]
    assert sizing["counter"] == "tokenizer" and "smollm" in sizing["tokenizer"]
    assert sizing["overhead_tokens"] > 0, sizing  # SmolLM2's chat template
