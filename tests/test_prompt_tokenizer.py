"""The tokenizer fallback: where a server gives no `usage.prompt_tokens`, the model's own
tokenizer counts the prefill phase's prompts.

Truth: the shipped SmolLM2 GGUF's counts below are what real llama.cpp's own `/tokenize` gave
for these texts (the embedded engine, once, by hand). Against the known-truth server, a small
byte-level BPE tokenizer that spells each filler word as one token counts every prompt a
constant apart from the server's (the nonce and the template differ, the words do not), so the
differential rate is the truth: 1 / prefill.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.engines.checkpoints import shipped_q4_path
from sagemeter.errors import UserError
from sagemeter.measure.prefill import FILLER, measure_prefill, prompt_text
from sagemeter.prompt_tokenizer import BYTES, load_tokenizer
from sagemeter.results import PrefillDetail
from sagemeter.transport.openai import OpenAIChat
from tests import cli_run

pytestmark = pytest.mark.alone  # timing against truth: the CPU to itself


def word_tokenizer(folder: Path) -> Path:
    """A Hugging Face byte-level BPE tokenizer.json whose merges spell each filler word, with
    its leading space, as one token; anything else stays in bytes."""
    vocab = {char: index for index, char in enumerate(BYTES.values())}
    merges: list[str] = []
    for word in sorted(set(FILLER)):
        built = BYTES[ord(" ")]
        for char in word:
            if f"{built} {char}" not in merges:
                merges.append(f"{built} {char}")
            built += char
            vocab.setdefault(built, len(vocab))
    spec = {
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "added_tokens": [{"id": len(vocab), "content": "<|im_end|>"}],
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder


def test_a_tokenizer_json_counts_words_and_bytes(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(word_tokenizer(tmp_path / "tok"))
    assert tokenizer.count(" the river ran") == 3
    assert tokenizer.count("q1f") == 3  # no merges: one token per byte
    assert tokenizer.count(prompt_text("q1f", 500)) == 3 + 500


@pytest.mark.slow  # reading the shipped GGUF's vocabulary takes seconds
def test_the_shipped_gguf_counts_as_llama_cpp_does() -> None:
    tokenizer = load_tokenizer(shipped_q4_path())
    assert "smollm" in tokenizer.source
    assert tokenizer.count(prompt_text("qab12cdn3", 32)) == 39
    assert tokenizer.count(prompt_text("q9f0e1an17", 500)) == 509
    assert tokenizer.count("Hello, world! 12345 The year 2024.") == 18
    assert tokenizer.count("What is 54 * 28? Reply with the number only.") == 17


def test_what_is_not_a_byte_level_bpe_tokenizer_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "wp").mkdir()
    (tmp_path / "wp" / "tokenizer.json").write_text(
        json.dumps({"model": {"type": "WordPiece", "vocab": {}, "merges": []}})
    )
    with pytest.raises(UserError, match="only byte-level BPE"):
        load_tokenizer(tmp_path / "wp")
    with pytest.raises(UserError, match=r"give a \.gguf file or a folder"):
        load_tokenizer(tmp_path / "missing.txt")


def _truth(prefill_s: float) -> TruthTiming:
    return TruthTiming(ttft_s=0.02, itl_s=0.001, prefill_s=prefill_s, prefix_cache=True)


def _prefill(url: str, tokenizer: Path | None) -> PrefillDetail:
    async def run() -> PrefillDetail:
        async with OpenAIChat(url) as client:
            return await measure_prefill(
                client, short_tokens=128, long_tokens=1024, repeats=3, tokenizer=tokenizer
            )

    return asyncio.run(run())


def test_without_a_server_count_the_tokenizer_counts_and_the_rate_is_the_truth(
    tmp_path: Path,
) -> None:
    # 100 µs a token: the long prompts 90 ms slower, so 1 ms of a busy host's jitter is 1%
    # (tests/measure/test_measure_prefill.py's SPAN_NOTE).
    truth = _truth(100e-6)
    folder = word_tokenizer(tmp_path / "tok")
    faults = Faults(no_prompt_tokens=True)
    with running_truth_server(truth, faults=faults) as url:
        counted = _prefill(url, folder)
        missing = _prefill(url, None)
    assert counted.valid, counted.problems
    assert counted.prompt_count_source == "tokenizer: tokenizer.json of tok"
    assert counted.tokens_per_second == pytest.approx(truth.prefill_tokens_per_second, rel=0.03)
    # The sizing hit the lengths asked, in the tokenizer's count.
    assert all(abs(n - 128) <= 2 for n in counted.short_prompt_tokens)
    assert all(abs(n - 1024) <= 2 for n in counted.long_prompt_tokens)
    assert any("counted by the model's tokenizer" in p for p in counted.problems)
    assert counted.prefix_cache is not None and counted.prefix_cache.prompt_tokens is not None
    assert all(r.prompt_tokens is None for r in counted.records)  # records keep the server's word
    # Without a tokenizer: no figure, and why.
    assert not missing.valid and missing.tokens_per_second is None
    assert "the model's tokenizer is not known (give --tokenizer" in missing.problems[0]


def _cli(
    args: list[str], tmp_path: Path, *, real_process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`sagemeter measure ARGS` in this process, or as its own process (a whole timed run)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["SAGEMETER_HOME"] = str(tmp_path / "home")
    return (cli_run.run if real_process else cli_run.invoke)(["measure", *args], env)


@pytest.mark.slow  # the real command, a whole measurement
def test_the_command_counts_with_the_tokenizer_given(tmp_path: Path) -> None:
    truth = _truth(100e-6)  # the long prompts 90 ms slower, as above
    folder = word_tokenizer(tmp_path / "tok")
    # five replies of each length, not --quick's two: the median of two is their mean, which one
    # short reply 26 ms late on a busy host moved 13 ms, and the rate 17% high (a fresh-clone run)
    args = ["--quick", "--levels", "1", "--prefill-tokens", "128,1024", "--timeout", "5s"]
    args += ["--repeats", "5"]
    with running_truth_server(truth, faults=Faults(no_prompt_tokens=True)) as url:
        done = _cli(
            [str(tmp_path / "o"), url, "--name", "t", "--tokenizer", str(folder), *args],
            tmp_path,
            real_process=True,
        )
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "o" / "measure-t.json").read_text())
    assert written["prefill_tokens_per_second"] == pytest.approx(10_000, rel=0.03)
    assert written["detail"]["prefill"]["prompt_count_source"].startswith("tokenizer:")
    assert written["detail"]["settings"]["tokenizer"] == str(folder.resolve())


def test_a_tokenizer_path_that_holds_none_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = _cli(
        [str(tmp_path / "o"), "http://127.0.0.1:9", "--tokenizer", str(tmp_path / "empty")],
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "--tokenizer" in done.stderr and "tokenizer.json" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "o").exists()
