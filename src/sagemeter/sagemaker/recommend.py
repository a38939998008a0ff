"""Which SageMaker GPU instance type to measure a checkpoint on, before paying for any.

For every real-time GPU instance type (`instances`), in every asked region: whether the
checkpoint's weights and the KV cache of `concurrency` requests of `max_model_len` tokens fit in
the GPUs' memory (at vLLM's memory share), the decode ceiling inspect predicts (all GPUs'
bandwidth / the bytes a token reads), the $/M tokens that ceiling costs at the Hosting price,
and the account's endpoint quota and what its endpoints already hold. Ranked by $/M tokens.

The ceiling is an upper bound on decode, so $/M tokens is a lower bound on cost; the known
measurements (`known_decode`) say by how much. Nothing is deployed; the checkpoint's header is
read, never its weights.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from sagemeter.bounds import MAX_CONCURRENCY
from sagemeter.errors import UserError
from sagemeter.inspect.build import facts_of
from sagemeter.inspect.hub import REPO_ID, HubSource
from sagemeter.inspect.kv_cache import KvCache, kv_cache_of
from sagemeter.inspect.sources import open_source, parse_source
from sagemeter.sagemaker.aws import Aws
from sagemeter.sagemaker.instances import GPU_INSTANCE_TYPES, InstanceType
from sagemeter.sagemaker.known_decode import KnownError, known_errors, measured_share_range
from sagemeter.sagemaker.pricing import PriceQuote, hosting_prices
from sagemeter.sagemaker.quota import QuotaRow, default_quota_regions, endpoint_quotas
from sagemeter.sagemaker.spec import DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_MAX_MODEL_LEN
from sagemeter.targets import AWS_REGION_NAME
from sagemeter.transport.aws_session import new_session

ACCEPTED = "a Hub model id (ORG/NAME, hf:ORG/NAME[@REVISION]) or a local checkpoint folder"


class RegionOffer(BaseModel):
    """One instance type in one region: its price and the account's quota there."""

    region: str
    usd_per_hour: float | None = None
    price_source: str | None = None
    quota: float | None = None
    quota_source: str | None = None
    in_use: int | None = None
    free: float | None = None
    usable: bool = Field(description="priced, and quota not known to be used up")
    why_not: str | None = Field(None, description="why not usable: no price, quota 0 or used up")
    note: str | None = Field(None, description="what could not be read (quota, endpoints)")


class Candidate(BaseModel):
    """One instance type: fit, predicted decode, cost, and where it can be had."""

    instance_type: str
    gpu: str
    gpus: int
    gpu_memory_gb: float
    bandwidth_gb_s: float = Field(description="all GPUs together")
    memory_budget_bytes: int = Field(description="GPU memory × vLLM's memory share")
    needed_bytes: int | None = Field(None, description="weights + KV cache; None: KV unknown")
    fits: bool | None = Field(None, description="None: the KV cache could not be sized")
    decode_tokens_per_second: float | None = Field(
        None, description="the ceiling at one request: bandwidth / bytes per token"
    )
    likely_decode_tokens_per_second: list[float] | None = Field(
        None, description="the ceiling × the lowest and highest share known measurements reached"
    )
    region: str | None = Field(None, description="the cheapest usable region")
    usd_per_hour: float | None = None
    usd_per_million_tokens_one: float | None = Field(
        None, description="$/M tokens at the ceiling, one request at a time"
    )
    usd_per_million_tokens: float | None = Field(
        None, description="$/M tokens at the ceiling × concurrency: a lower bound on cost"
    )
    regions: list[RegionOffer] = Field(default_factory=list)
    rank: int | None = Field(None, description="1 = cheapest per token; None = not ranked")
    why_not: str | None = Field(None, description="why it is not ranked")
    notes: list[str] = Field(default_factory=list)


class Recommendation(BaseModel):
    checkpoint: str
    model_id: str | None = Field(None, description="the Hub id a plan deploys; None: local")
    revision: str | None = None
    weights_bytes: int
    decode_bytes_per_token: int
    kv_cache: KvCache | None
    kv_cache_note: str | None = None
    max_model_len: int
    concurrency: int
    gpu_memory_utilization: float
    regions: list[str]
    candidates: list[Candidate]
    known_errors: list[KnownError]
    notes: list[str] = Field(default_factory=list)

    @property
    def ranked(self) -> list[Candidate]:
        return [c for c in self.candidates if c.rank is not None]


@dataclass(frozen=True)
class Checkpoint:
    """What was given, checked: a local folder, or a Hub model."""

    text: str
    source: str  # as inspect's sources take it
    hub: HubSource | None


def parse_checkpoint(text: str) -> Checkpoint:
    """The CHECKPOINT argument, checked before anything is read (exit 2 on a bad one)."""
    raw = text.strip()
    if not raw:
        raise UserError(f"an empty CHECKPOINT; give {ACCEPTED}")
    path = Path(raw).expanduser()
    if raw.startswith("hf:") or (not path.exists() and REPO_ID.match(raw.partition("@")[0])):
        source = raw if raw.startswith("hf:") else f"hf:{raw}"
        where = parse_source(source).where
        assert isinstance(where, HubSource)
        return Checkpoint(raw, source, where)
    if not path.exists():
        raise UserError(f"{raw!r}: no such folder, and not a Hub model id; give {ACCEPTED}")
    parse_source(raw)  # a folder that holds a checkpoint
    return Checkpoint(raw, raw, None)


def known_regions() -> frozenset[str]:
    """Every region botocore's SageMaker endpoints know, in every partition."""
    session = new_session()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions("sagemaker", partition)
    )


def check_options(regions: list[str], max_model_len: int, concurrency: int, top: int) -> None:
    """Every option, before any work: one line naming the bad one."""
    known = known_regions()
    for region in regions:
        if not AWS_REGION_NAME.match(region) or region not in known:
            raise UserError(f"--region {region!r}: not a region SageMaker is in (e.g. us-east-2)")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise UserError(f"--concurrency {concurrency}: give 1 to {MAX_CONCURRENCY} requests")
    if max_model_len < 1:
        raise UserError(f"--max-model-len {max_model_len}: give a positive number of tokens")
    if top < 1:
        raise UserError(f"--top {top}: give 1 or more")


def _offers(
    instance: InstanceType,
    regions: list[str],
    prices: dict[str, dict[str, PriceQuote | None] | str],
    quotas: dict[str, dict[str, QuotaRow]],
) -> list[RegionOffer]:
    offers = []
    for region in regions:
        priced = prices[region]
        quote = priced.get(instance.name) if isinstance(priced, dict) else None
        row = quotas[region][instance.name]
        offer = RegionOffer(
            region=region,
            usd_per_hour=quote.usd_per_hour if quote else None,
            price_source=quote.source if quote else None,
            quota=row.quota,
            quota_source=row.quota_source,
            in_use=row.in_use,
            free=row.free,
            usable=False,
        )
        reasons = []
        if isinstance(priced, str):
            reasons.append(f"price unknown: {priced}")
        elif quote is None:
            reasons.append("no on-demand real-time Hosting price here")
        if row.quota == 0:
            reasons.append("quota 0")
        elif row.free == 0:
            reasons.append(f"quota {row.quota:g}, all in use")
        offer.usable = not reasons
        offer.why_not = "; ".join(reasons) or None
        offer.note = "; ".join(n for n in (row.error, row.in_use_note) if n) or None
        offers.append(offer)
    return sorted(offers, key=lambda o: (not o.usable, o.usd_per_hour or math.inf, o.region))


def _candidate(
    instance: InstanceType,
    offers: list[RegionOffer],
    weights: int,
    decode_bytes: int,
    kv: KvCache | None,
    max_model_len: int,
    concurrency: int,
    utilization: float,
) -> Candidate:
    budget = int(instance.memory_bytes * utilization)
    needed = weights + concurrency * max_model_len * kv.bytes_per_token if kv else None
    ceiling = instance.bandwidth_gb_s * 1e9 / decode_bytes if decode_bytes > 0 else None
    low, high = measured_share_range()
    candidate = Candidate(
        instance_type=instance.name,
        gpu=instance.gpu.name,
        gpus=instance.gpus,
        gpu_memory_gb=instance.gpu_memory_gb,
        bandwidth_gb_s=instance.bandwidth_gb_s,
        memory_budget_bytes=budget,
        needed_bytes=needed,
        fits=None if needed is None else needed <= budget,
        decode_tokens_per_second=round(ceiling, 1) if ceiling else None,
        likely_decode_tokens_per_second=(
            [round(ceiling * low, 1), round(ceiling * high, 1)] if ceiling else None
        ),
        regions=offers,
    )
    if instance.gpus > 1:
        candidate.notes.append(
            f"{instance.gpus} GPUs: tensor parallel over all of them is assumed to add their "
            "bandwidth, which small models do not reach"
        )
    usable = [offer for offer in offers if offer.usable]
    if usable and ceiling:
        best = usable[0]
        assert best.usd_per_hour is not None
        candidate.region = best.region
        candidate.usd_per_hour = best.usd_per_hour
        candidate.usd_per_million_tokens_one = round(best.usd_per_hour / (ceiling * 3600) * 1e6, 4)
        candidate.usd_per_million_tokens = round(
            best.usd_per_hour / (ceiling * concurrency * 3600) * 1e6, 4
        )
    reasons = []
    if weights > budget:
        reasons.append(
            f"the weights alone ({weights / 1e9:.1f} GB) exceed "
            f"{utilization:.0%} of {instance.memory_bytes / 1e9:g} GB"
        )
    elif candidate.fits is False:
        assert needed is not None
        reasons.append(
            f"does not fit: weights and KV cache need {needed / 1e9:.1f} GB, "
            f"{utilization:.0%} of {instance.memory_bytes / 1e9:g} GB is {budget / 1e9:.1f} GB"
        )
    if not usable and not reasons:
        by_reason: dict[str, list[str]] = {}
        for offer in offers:
            by_reason.setdefault(offer.why_not or "?", []).append(offer.region)
        reasons.append(
            "no usable region: "
            + "; ".join(f"{', '.join(where)}: {why}" for why, where in by_reason.items())
        )
    candidate.why_not = "; ".join(reasons) or None
    return candidate


def recommend(
    checkpoint: Checkpoint,
    *,
    regions: list[str] | None = None,
    max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    concurrency: int = 1,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    aws: Aws | None = None,
) -> Recommendation:
    """Every GPU instance type for `checkpoint`, ranked by predicted $/M tokens (see module)."""
    aws = aws or Aws()
    aws.require_credentials()
    regions = list(dict.fromkeys(regions or default_quota_regions(aws)))
    table = open_source(parse_source(checkpoint.source))
    facts = facts_of(table, None, False)
    kv, kv_note = kv_cache_of(table.config)
    types = [instance.name for instance in GPU_INSTANCE_TYPES]
    prices: dict[str, dict[str, PriceQuote | None] | str] = {}
    quotas: dict[str, dict[str, QuotaRow]] = {}
    for region in regions:
        try:
            prices[region] = hosting_prices(types, region, aws=aws)
        except UserError as exc:
            prices[region] = str(exc)
        quotas[region] = {row.instance_type: row for row in endpoint_quotas(types, region, aws=aws)}
    candidates = [
        _candidate(
            instance,
            _offers(instance, regions, prices, quotas),
            facts.total_bytes,
            facts.decode.bytes_per_token,
            kv,
            max_model_len,
            concurrency,
            gpu_memory_utilization,
        )
        for instance in GPU_INSTANCE_TYPES
    ]
    ordered = sorted(candidates, key=_rank_key)
    rank = 0
    for candidate in ordered:
        if candidate.why_not is None and candidate.usd_per_million_tokens is not None:
            rank += 1
            candidate.rank = rank
    notes = [
        "decode is inspect's ceiling (memory bandwidth / bytes a token reads); the KV cache, "
        "kernels and scheduling make real decode slower, so $/M tokens is a lower bound",
        *(
            [
                f"$/M at {concurrency} at once assumes {concurrency} × the one-request ceiling: "
                "batched decode shares each weight read, but measured throughput grows less"
            ]
            if concurrency > 1
            else []
        ),
        "fit counts the checkpoint's tensors and the KV cache only; vLLM also keeps activations "
        "and CUDA graphs within its memory share",
        *facts.decode.notes,
    ]
    if kv:
        notes.extend(kv.notes)
    return Recommendation(
        checkpoint=checkpoint.text,
        model_id=checkpoint.hub.repo_id if checkpoint.hub else None,
        revision=checkpoint.hub.revision if checkpoint.hub else None,
        weights_bytes=facts.total_bytes,
        decode_bytes_per_token=facts.decode.bytes_per_token,
        kv_cache=kv,
        kv_cache_note=kv_note,
        max_model_len=max_model_len,
        concurrency=concurrency,
        gpu_memory_utilization=gpu_memory_utilization,
        regions=regions,
        candidates=ordered,
        known_errors=known_errors(),
        notes=notes,
    )


def _rank_key(candidate: Candidate) -> tuple[int, float, str]:
    """Ranked ones by $/M tokens (those known to fit before those whose KV is unknown), then
    the rest by name."""
    if candidate.why_not is not None or candidate.usd_per_million_tokens is None:
        return (2, 0.0, candidate.instance_type)
    return (0 if candidate.fits else 1, candidate.usd_per_million_tokens, candidate.instance_type)


def plan_name_for(model_id: str) -> str:
    """A short plan name from the model id, so endpoint names (PLAN-ARM) stay under 63."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", model_id.rsplit("/", 1)[-1]).strip("-")[:40]
    return f"{name or 'model'}-types"
