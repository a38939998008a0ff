"""`sagemeter sagemaker recommend`: a checkpoint's header from a loopback Hub (HF_ENDPOINT),
prices and quotas from the loopback Price List and Service Quotas, endpoints in use from moto;
real boto3 throughout. The expected fit, ceiling and $/M tokens are computed here from the
header's shapes, the data-sheet figures and the prices put into the fakes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer
from typer.testing import CliRunner, Result

from sagemeter.cli import run as run_cli
from sagemeter.cli import sagemaker as sagemaker_cli
from sagemeter.experiment.plan import load_plan
from sagemeter.sagemaker.known_decode import known_errors
from tests.article_header import QAT_CONFIG, qat_entries, write_checkpoint
from tests.checkpoint_files import DTYPE_BYTES, write_header_only
from tests.hub_fake import Hub, Repo, serve_hub
from tests.sagemaker_fakes import plain_endpoint

if TYPE_CHECKING:
    from tests.sagemaker_fakes import World

MODEL = "test/llama-shaped-8b"
QAT = "google/gemma-4-E2B-it-qat-w4a16-ct"
README = Path(__file__).resolve().parents[2] / "README.md"
# A Llama-3-8B-shaped checkpoint: 32 layers of 4096, 8 KV heads of 128, a 128,256-token vocabulary.
LAYERS, HIDDEN, MLP, VOCAB, HEADS, KV_HEADS = 32, 4096, 14336, 128_256, 32, 8
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": HIDDEN,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "torch_dtype": "bfloat16",
}
KV_PER_TOKEN = 2 * LAYERS * KV_HEADS * (HIDDEN // HEADS) * 2  # K and V, bf16
# Hosting $/hour put into the fake Price List (the g6.xlarge one is the article's).
PRICES = {
    "us-east-2": {
        "ml.g6.xlarge": 1.1267, "ml.g5.xlarge": 1.408, "ml.g6e.xlarge": 2.242,
        "ml.g4dn.xlarge": 0.736, "ml.g6.12xlarge": 5.752, "ml.g6e.12xlarge": 10.488,
    },
    "us-east-1": {"ml.g6.xlarge": 1.2, "ml.g6e.xlarge": 2.1, "ml.g5.xlarge": 1.41},
}  # fmt: skip
BANDWIDTH = {"L4": 300, "A10G": 600, "L40S": 864, "T4": 320}
MEMORY_GB = {"L4": 24, "A10G": 24, "L40S": 48, "T4": 16}
GPUS = {
    "ml.g6.xlarge": ("L4", 1), "ml.g5.xlarge": ("A10G", 1), "ml.g6e.xlarge": ("L40S", 1),
    "ml.g4dn.xlarge": ("T4", 1), "ml.g6.12xlarge": ("L4", 4), "ml.g6e.12xlarge": ("L40S", 4),
}  # fmt: skip


def entries() -> list[tuple[str, str, list[int]]]:
    head_dim = HIDDEN // HEADS
    found = [("model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN])]
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}"
        for name, rows, cols in (
            ("self_attn.q_proj", HIDDEN, HIDDEN),
            ("self_attn.k_proj", KV_HEADS * head_dim, HIDDEN),
            ("self_attn.v_proj", KV_HEADS * head_dim, HIDDEN),
            ("self_attn.o_proj", HIDDEN, HIDDEN),
            ("mlp.gate_proj", MLP, HIDDEN),
            ("mlp.up_proj", MLP, HIDDEN),
            ("mlp.down_proj", HIDDEN, MLP),
        ):
            found.append((f"{prefix}.{name}.weight", "BF16", [rows, cols]))
        for norm in ("input_layernorm", "post_attention_layernorm"):
            found.append((f"{prefix}.{norm}.weight", "BF16", [HIDDEN]))
    found += [("model.norm.weight", "BF16", [HIDDEN]), ("lm_head.weight", "BF16", [VOCAB, HIDDEN])]
    return found


def nbytes(shape: list[int]) -> int:
    total = DTYPE_BYTES["BF16"]
    for size in shape:
        total *= size
    return total


WEIGHTS = sum(nbytes(shape) for _, _, shape in entries())
# Every tensor but the input embedding is read per token, plus one row of the embedding.
READ_PER_TOKEN = WEIGHTS - nbytes([VOCAB, HIDDEN]) + nbytes([HIDDEN])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llama-shaped")
    write_header_only(folder / "model.safetensors", entries())
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return folder


@pytest.fixture(scope="module")
def qat_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The article's QAT header (tests/article_header.py); its config.json names no layers."""
    return write_checkpoint(tmp_path_factory.mktemp("qat"), qat_entries(), QAT_CONFIG)


@pytest.fixture
def hub(
    checkpoint: Path, qat_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Hub]:
    repos = {
        MODEL: Repo({path.name: path for path in checkpoint.iterdir()}),
        QAT: Repo({path.name: path for path in qat_checkpoint.iterdir()}),
    }
    with serve_hub(repos) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        yield served


@pytest.fixture
def priced(world: World) -> World:
    """Prices in two regions; quotas: g6.xlarge 1 in us-east-2 (held by someone's endpoint) and
    1 in us-east-1; g5.xlarge 0 everywhere; the rest 2 by default."""
    for region, prices in PRICES.items():
        code = {"us-east-2": "USE2", "us-east-1": "USE1"}[region]
        for name, usd in prices.items():
            world.prices.append(
                world.price_item(name, region, f"{code}-Host:{name}", "Hosting", f"{usd:.4f}")
            )
            # A Training price of the same type must not be taken for Hosting.
            world.prices.append(
                world.price_item(name, region, f"{code}-Train:{name}", "Training", "0.01")
            )
    for region in PRICES:
        world.quotas.defaults[region] = [
            world.quota_item(f"{name} for endpoint usage", 2) for name in GPUS
        ]
        world.quotas.applied[region] = [
            world.quota_item("ml.g6.xlarge for endpoint usage", 1),
            world.quota_item("ml.g5.xlarge for endpoint usage", 0),
        ]
    plain_endpoint("someone-elses", "us-east-2", "ml.g6.xlarge")
    return world


def _app() -> typer.Typer:
    app = typer.Typer()
    sagemaker_cli.register(app)
    run_cli.register(app)
    return app


def run(*args: str) -> Result:
    """`sagemeter sagemaker recommend ARGS…`."""
    return CliRunner().invoke(_app(), ["sagemaker", "recommend", *args])


def ceiling(instance_type: str) -> float:
    gpu, count = GPUS[instance_type]
    return count * BANDWIDTH[gpu] * 1e9 / READ_PER_TOKEN


def usd_per_million(instance_type: str, region: str, concurrency: int) -> float:
    return PRICES[region][instance_type] / (ceiling(instance_type) * concurrency * 3600) * 1e6


def test_ranks_by_predicted_cost_with_fit_quota_and_reasons(priced: World, hub: Hub) -> None:
    result = run(MODEL, "--region", "us-east-2", "--region", "us-east-1", "--json")
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["weights_bytes"] == WEIGHTS and answer["decode_bytes_per_token"] == READ_PER_TOKEN
    assert answer["kv_cache"]["bytes_per_token"] == KV_PER_TOKEN == 131_072
    by_type = {c["instance_type"]: c for c in answer["candidates"]}

    # One L4 at 8,192 tokens, one at a time: 16.06 GB + 1.07 GB within 90% of 24 GB.
    g6 = by_type["ml.g6.xlarge"]
    assert g6["needed_bytes"] == WEIGHTS + 8192 * KV_PER_TOKEN
    assert g6["memory_budget_bytes"] == int(24e9 * 0.9) and g6["fits"] is True
    # Its us-east-2 quota is held by someone's endpoint: the cheaper region is not usable.
    assert g6["region"] == "us-east-1" and g6["usd_per_hour"] == 1.2
    east2 = next(o for o in g6["regions"] if o["region"] == "us-east-2")
    assert (east2["quota"], east2["in_use"], east2["free"], east2["usable"]) == (1, 1, 0, False)
    assert "all in use" in east2["why_not"]
    assert g6["decode_tokens_per_second"] == round(ceiling("ml.g6.xlarge"), 1)
    assert g6["usd_per_million_tokens"] == round(usd_per_million("ml.g6.xlarge", "us-east-1", 1), 4)

    # Left out, each with why: the T4's 16 GB, g5's zero quota, types with no price.
    assert "weights alone" in by_type["ml.g4dn.xlarge"]["why_not"]
    assert "quota 0" in by_type["ml.g5.xlarge"]["why_not"]
    assert "no on-demand real-time Hosting price" in by_type["ml.p5.48xlarge"]["why_not"]

    ranked = [c for c in answer["candidates"] if c["rank"] is not None]
    expected = sorted(
        (
            min(usd_per_million(t, r, 1) for r in PRICES if t in PRICES[r] and not (t == "ml.g6.xlarge" and r == "us-east-2")),
            t,
        )
        for t in ("ml.g6.xlarge", "ml.g6e.xlarge", "ml.g6.12xlarge", "ml.g6e.12xlarge")
    )  # fmt: skip
    assert [c["instance_type"] for c in ranked] == [t for _, t in expected]
    assert [c["rank"] for c in ranked] == [1, 2, 3, 4]
    assert answer["candidates"][: len(ranked)] == ranked  # the ranked ones come first
    # The Training price was never taken for Hosting.
    assert all(c["usd_per_hour"] != 0.01 for c in ranked)
    # Only headers crossed the Hub's wire.
    assert hub.bytes_sent(MODEL, "model.safetensors") < 100_002


def test_the_articles_qat_header_gets_inspects_l4_ceiling_and_an_unknown_kv_cache(
    priced: World, hub: Hub
) -> None:
    """The same ceiling `inspect --gpu L4` gives (161.1 tokens/s on the reconstruction, as on the
    real header); a config.json without layers leaves the fit unknown, said, and the types still
    ranked by $/M tokens."""
    from sagemeter.inspect.build import inspect_sources

    result = run(QAT, "-r", "us-east-2", "-r", "us-east-1", "--json")
    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["kv_cache"] is None and "names no num_hidden_layers" in answer["kv_cache_note"]
    by_type = {c["instance_type"]: c for c in answer["candidates"]}
    g6 = by_type["ml.g6.xlarge"]
    inspected = inspect_sources([f"hf:{QAT}"], gpu="ml.g6.xlarge").checkpoints[0].ceiling
    assert inspected is not None and g6["decode_tokens_per_second"] == inspected.tokens_per_second
    assert round(g6["decode_tokens_per_second"]) == 161 and g6["fits"] is None
    assert g6["needed_bytes"] is None
    low, high = g6["likely_decode_tokens_per_second"]
    assert low <= 105.1 <= high  # the article's measured QAT decode on that L4
    # Fit unknown everywhere: ranked by $/M all the same. The T4 (8.3 GB of weights within its
    # 14.4 GB) at $0.736/h and 320 GB/s comes first.
    read = answer["decode_bytes_per_token"]
    costs = {
        t: min(
            usd / (count * BANDWIDTH[gpu] * 1e9 / read * 3600) * 1e6
            for region, prices in PRICES.items()
            for name, usd in prices.items()
            if name == t and not (t == "ml.g6.xlarge" and region == "us-east-2")
        )
        for t, (gpu, count) in GPUS.items()
        if t != "ml.g5.xlarge"  # quota 0 in both regions
    }
    ranked = [c["instance_type"] for c in answer["candidates"] if c["rank"] is not None]
    assert ranked == sorted(costs, key=lambda t: costs[t]) and ranked[0] == "ml.g4dn.xlarge"


def test_concurrency_and_context_decide_the_fit(priced: World, hub: Hub, tmp_path: Path) -> None:
    """At 8 × 8,192 tokens the KV cache is 8.6 GB: one L4 no longer fits, one L40S does; the
    plan measures 8 at once too."""
    plan_path = tmp_path / "c8.toml"
    result = run(MODEL, "-r", "us-east-2", "--concurrency", "8", "--json", "--plan", str(plan_path))
    assert result.exit_code == 0, result.stderr
    by_type = {c["instance_type"]: c for c in json.loads(result.stdout)["candidates"]}
    needed = WEIGHTS + 8 * 8192 * KV_PER_TOKEN
    assert needed > 24e9 * 0.9 and needed < 48e9 * 0.9
    assert by_type["ml.g6.xlarge"]["fits"] is False
    assert "does not fit" in by_type["ml.g6.xlarge"]["why_not"]
    assert by_type["ml.g6e.xlarge"]["fits"] is True and by_type["ml.g6e.xlarge"]["rank"] == 1
    assert by_type["ml.g6e.xlarge"]["usd_per_million_tokens"] == round(
        usd_per_million("ml.g6e.xlarge", "us-east-2", 8), 4
    )
    plan, _ = load_plan(plan_path)
    assert plan.measure.levels == [1, 4, 8, 16]
    assert [arm.table.instance_type for arm in plan.arms if arm.platform == "sagemaker"] == [
        c["instance_type"] for c in json.loads(result.stdout)["candidates"][:5] if c["rank"]
    ]


def test_table_states_the_known_error_and_the_plan_loads(
    priced: World, hub: Hub, tmp_path: Path
) -> None:
    plan_path = tmp_path / "types.toml"
    result = run(
        MODEL, "-r", "us-east-2", "-r", "us-east-1", "--top", "3", "--plan", str(plan_path)
    )
    assert result.exit_code == 0, result.stderr
    assert "ml.g6.xlarge" in result.stdout and "Not ranked" in result.stdout
    for row in known_errors():
        assert f"predicted {row.predicted:g}, measured {row.measured:g}" in result.stdout

    plan, _ = load_plan(plan_path)  # the loader `sagemeter run` uses, with its run-time checks
    arms = {arm.name: arm.table for arm in plan.arms}
    # By $/M: g6e.xlarge ($2.10 / 864 GB/s), g6e.12xlarge ($10.488 / 4 × 864), g6.xlarge ($1.20
    # in us-east-1, its us-east-2 quota being held, / 300).
    assert list(arms) == ["g6e.xlarge", "g6e.12xlarge", "g6.xlarge"]
    assert all(
        s is not None and s.model == MODEL and s.max_model_len == 8192 for s in arms.values()
    )
    g6e, g6e_12, g6 = arms["g6e.xlarge"], arms["g6e.12xlarge"], arms["g6.xlarge"]
    assert g6e is not None and g6e_12 is not None and g6 is not None
    assert (g6e.instance_type, g6e.region, g6e.fallback_regions) == (
        "ml.g6e.xlarge",
        "us-east-1",
        ["us-east-2"],
    )
    assert (g6.region, g6.fallback_regions) == ("us-east-1", [])  # us-east-2's quota is used up
    assert g6e_12.region == "us-east-2" and g6e_12.env == {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}
    assert plan.measure.levels == [1, 4, 16]

    again = run(MODEL, "-r", "us-east-2", "--plan", str(plan_path))
    assert again.exit_code == 2 and "already exists" in again.stderr


def test_the_written_plan_passes_run_dry_run(priced: World, hub: Hub, tmp_path: Path) -> None:
    plan_path = tmp_path / "types.toml"
    assert run(MODEL, "-r", "us-east-2", "--top", "2", "--plan", str(plan_path)).exit_code == 0
    before = list(priced.moto.calls)  # someone else's endpoint, made by the fixture
    dry = CliRunner().invoke(_app(), ["run", str(plan_path), "--dry-run"])
    assert dry.exit_code == 0, dry.stderr + dry.stdout
    assert "ml.g6e.xlarge" in dry.stdout and "ml.g6e.12xlarge" in dry.stdout
    assert priced.moto.calls == before  # a dry run creates nothing


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--region", "us-east-9"], "--region 'us-east-9': not a region SageMaker is in"),
        (["--region", "mars"], "--region 'mars': not a region SageMaker is in"),
        (["--concurrency", "0"], "--concurrency 0: give 1 to 1024"),
        (["--max-model-len", "0"], "--max-model-len 0"),
        (["--top", "1", "--plan", "p.toml"], "a plan compares at least two"),
    ],
)
def test_bad_options_are_one_line_before_any_work(
    priced: World, hub: Hub, args: list[str], expected: str
) -> None:
    result = run(MODEL, *args)
    assert result.exit_code == 2, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert hub.requests == [] and priced.json_fake.requests == []


def test_a_concurrency_that_is_no_number_is_one_line_through_the_real_command(
    priced: World, hub: Hub
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagemeter",
            "sagemaker",
            "recommend",
            MODEL,
            "--concurrency",
            "lots",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--concurrency" in lines[0], result.stderr
    assert hub.requests == [] and priced.json_fake.requests == []


def test_a_missing_checkpoint_is_one_line_and_a_local_folder_cannot_be_planned(
    priced: World, hub: Hub, checkpoint: Path, tmp_path: Path
) -> None:
    missing = run("./no/such/folder", "-r", "us-east-2")
    assert missing.exit_code == 2 and "no such folder, and not a Hub model id" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    local = run(str(checkpoint), "-r", "us-east-2", "--plan", str(tmp_path / "p.toml"))
    assert local.exit_code == 2 and "--plan needs a Hub model id" in local.stderr
    assert priced.json_fake.requests == [] and not (tmp_path / "p.toml").exists()
    # Without --plan a local folder is read from disk, like `inspect`.
    ok = run(str(checkpoint), "-r", "us-east-2", "--json")
    assert ok.exit_code == 0, ok.stderr
    assert json.loads(ok.stdout)["weights_bytes"] == WEIGHTS and hub.requests == []


def test_known_error_is_computed_and_the_readme_states_it() -> None:
    rows = {(row.gpu, row.what): row for row in known_errors()}
    bf16, qat = rows[("L4", "bf16 decode tokens/s")], rows[("L4", "QAT w4a16 decode tokens/s")]
    assert bf16.predicted == round(300e9 / 4.597e9, 2) and bf16.measured == 51.3
    assert qat.predicted == round(300e9 / 1.862e9, 2) and qat.measured == 105.1
    ratio = rows[("T4", "QAT / bf16 decode ratio")]
    assert ratio.predicted == round(4.597 / 1.862, 2) and ratio.measured == 1.79
    text = README.read_text()
    for row in rows.values():
        line = re.search(rf"\| {re.escape(row.what)} \| {row.gpu} \|([^\n]*)", text)
        assert line, row.what
        cells = [cell.strip() for cell in line.group(1).split("|") if cell.strip()]
        assert cells[:4] == [
            f"{row.predicted:g}",
            f"{row.measured:g}",
            f"{row.measured_share:.0%}",
            f"{row.error_percent:+.0f}%",
        ], cells


def test_every_catalogued_type_is_a_real_time_type_botocore_accepts() -> None:
    from sagemeter.sagemaker.instances import GPU_INSTANCE_TYPES
    from sagemeter.sagemaker.spec import instance_types_known

    names = [instance.name for instance in GPU_INSTANCE_TYPES]
    assert len(names) == len(set(names)) and set(names) <= instance_types_known()
    g6 = next(instance for instance in GPU_INSTANCE_TYPES if instance.name == "ml.g6.12xlarge")
    assert (g6.gpu.name, g6.gpus, g6.gpu_memory_gb, g6.bandwidth_gb_s) == ("L4", 4, 24.0, 1200)


def test_kv_cache_of_a_gemma_like_config_counts_only_layers_with_their_own_cache() -> None:
    """35 layers of which the last 20 reuse an earlier cache; every fifth a full-attention layer
    with heads of 512 (the article's reconstruction, tests/article_header.py), 1 KV head, bf16."""
    from sagemeter.inspect.kv_cache import kv_cache_of

    kinds = ["full_attention" if layer % 5 == 4 else "sliding_attention" for layer in range(35)]
    config = {
        "model_type": "gemma4",
        "text_config": {
            "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1,
            "head_dim": 256, "global_head_dim": 512, "num_kv_shared_layers": 20,
            "layer_types": kinds, "torch_dtype": "bfloat16",
        },
    }  # fmt: skip
    kv, why = kv_cache_of(config)
    assert why is None and kv is not None
    # Layers 0-14 keep a cache: 3 full (4, 9, 14) at 512, 12 sliding at 256; K and V, 2 bytes.
    assert kv.layers == 15 and kv.bytes_per_token == 2 * 2 * (3 * 512 + 12 * 256) == 18_432
    assert any("sliding-window" in note for note in kv.notes)
    missing, why_missing = kv_cache_of(None)
    assert missing is None and "no config.json" in (why_missing or "")
    no_dtype, _ = kv_cache_of({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64})
    assert no_dtype is not None and no_dtype.bytes_per_token == 2 * 2 * 4 * 16 * 2
    assert any("16-bit assumed" in note for note in no_dtype.notes)


def test_a_refused_quota_read_keeps_the_ranking_and_a_refused_price_read_says_why(
    priced: World, hub: Hub
) -> None:
    priced.json_fake.handlers["ServiceQuotasV20190624.ListServiceQuotas"] = lambda body: (
        400, {"__type": "AccessDeniedException", "message": "User is not authorized to perform servicequotas:ListServiceQuotas"}
    )  # fmt: skip
    result = run(MODEL, "-r", "us-east-2", "--json")
    assert result.exit_code == 0, result.stderr
    first = json.loads(result.stdout)["candidates"][0]
    # g5.xlarge's quota 0 can no longer be seen: it is usable, with the reason, and cheapest.
    assert first["rank"] == 1 and first["instance_type"] == "ml.g5.xlarge"
    [offer] = first["regions"]
    assert offer["quota"] is None and offer["in_use"] == 0
    assert "AWS denied servicequotas:ListServiceQuotas in us-east-2" in offer["note"]

    priced.json_fake.handlers["AWSPriceListService.GetProducts"] = lambda body: (
        400, {"__type": "AccessDeniedException", "message": "not authorized to perform: pricing:GetProducts"}
    )  # fmt: skip
    refused = run(MODEL, "-r", "us-east-1", "--json")  # us-east-1's prices are not cached yet
    assert refused.exit_code == 0, refused.stderr
    candidates = json.loads(refused.stdout)["candidates"]
    assert all(c["rank"] is None and c["usd_per_hour"] is None for c in candidates)
    g6 = next(c for c in candidates if c["instance_type"] == "ml.g6.xlarge")
    assert "us-east-1: price unknown: AWS denied pricing:GetProducts" in g6["why_not"]
