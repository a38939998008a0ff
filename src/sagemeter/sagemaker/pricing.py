"""On-demand USD per instance-hour for real-time Hosting, from the AWS Price List API, cached.

The Price List API answers from us-east-1 for every region. A SageMaker instance type has several
products (Hosting, Training, Notebook, Processing, …); only real-time Hosting is what an endpoint
bills: component `Hosting`, usage type `<REGION-CODE>-Host:<instance type>`. Every PriceList item
is a JSON document in a string. Quotes are cached in the cache dir with the date they were fetched;
`--price-per-hour` overrides everything.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sagemeter.atomic import write_json_atomic
from sagemeter.errors import UserError
from sagemeter.paths import cache_dir
from sagemeter.sagemaker.aws import Aws, aws_errors

SERVICE_CODE = "AmazonSageMaker"
CACHE_MAX_AGE = timedelta(days=30)


class PriceQuote(BaseModel):
    instance_type: str
    region: str
    usd_per_hour: float
    source: str
    fetched_utc: str
    description: str | None = None
    usage_type: str | None = None
    effective_date: str | None = None


def _cache_path() -> Path:
    return cache_dir() / "sagemaker-prices.json"


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _fresh(quote: PriceQuote) -> bool:
    try:
        fetched = datetime.strptime(quote.fetched_utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return False
    return datetime.now(UTC) - fetched < CACHE_MAX_AGE


def manual_quote(instance_type: str, region: str, usd_per_hour: float) -> PriceQuote:
    """A quote the user gave (`--price-per-hour`); it wins over the Price List."""
    if usd_per_hour < 0:
        raise UserError("--price-per-hour must not be negative")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return PriceQuote(
        instance_type=instance_type,
        region=region,
        usd_per_hour=usd_per_hour,
        source="--price-per-hour",
        fetched_utc=now,
    )


def hourly_price(
    instance_type: str,
    region: str,
    *,
    refresh: bool = False,
    price_per_hour: float | None = None,
    aws: Aws | None = None,
) -> PriceQuote:
    """The on-demand Hosting price of one instance of `instance_type` in `region`."""
    if price_per_hour is not None:
        return manual_quote(instance_type, region, price_per_hour)
    key = f"{region}/{instance_type}"
    cache = _read_cache()
    if not refresh and key in cache:
        try:
            cached = PriceQuote.model_validate(cache[key])
            if _fresh(cached):
                return cached
        except ValueError:
            pass
    quote = _fetch(instance_type, region, aws or Aws())
    cache = _read_cache()
    cache[key] = quote.model_dump()
    write_json_atomic(_cache_path(), cache)
    return quote


def _fetch(instance_type: str, region: str, aws: Aws) -> PriceQuote:
    filters = [
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"},
    ]
    items: list[str] = []
    with aws_errors(f"look up the price of {instance_type}", region, "pricing"):
        paginator = aws.pricing().get_paginator("get_products")
        for page in paginator.paginate(
            ServiceCode=SERVICE_CODE,
            Filters=filters,  # type: ignore[arg-type]
            FormatVersion="aws_v1",
        ):
            items.extend(page.get("PriceList", []))
    quote = pick_hosting_price(items, instance_type, region)
    if quote is None:
        raise UserError(
            f"the AWS Price List has no on-demand real-time Hosting price for {instance_type} in "
            f"{region}: check the instance type, or pass --price-per-hour"
        )
    return quote


def pick_hosting_price(items: list[str], instance_type: str, region: str) -> PriceQuote | None:
    """The on-demand hourly USD of real-time Hosting among PriceList JSON strings."""
    usage = re.compile(rf"^(?:[A-Z0-9]+-)?Host:{re.escape(instance_type)}$")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for raw in items:
        try:
            item = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            continue
        product = item.get("product") or {}
        attributes = product.get("attributes") or {}
        if attributes.get("instanceName", instance_type) != instance_type:
            continue
        if attributes.get("component", "Hosting") != "Hosting":
            continue
        usage_type = str(attributes.get("usagetype", ""))
        if not usage.match(usage_type):
            continue
        for term in (item.get("terms") or {}).get("OnDemand", {}).values():
            for dimension in (term.get("priceDimensions") or {}).values():
                unit = str(dimension.get("unit", "")).lower()
                usd = (dimension.get("pricePerUnit") or {}).get("USD")
                if usd is None or not unit.startswith("hr"):
                    continue
                try:
                    value = float(usd)
                except ValueError:
                    continue
                if value <= 0:
                    continue
                return PriceQuote(
                    instance_type=instance_type,
                    region=region,
                    usd_per_hour=value,
                    source="AWS Price List API (on-demand, real-time Hosting)",
                    fetched_utc=now,
                    description=dimension.get("description"),
                    usage_type=usage_type,
                    effective_date=term.get("effectiveDate"),
                )
    return None


def try_hourly_price(
    instance_type: str, region: str, *, price_per_hour: float | None = None, aws: Aws | None = None
) -> tuple[PriceQuote | None, str | None]:
    """(quote, None) or (None, why): for tables where a missing price must not stop the rest."""
    try:
        return hourly_price(instance_type, region, price_per_hour=price_per_hour, aws=aws), None
    except UserError as exc:
        return None, str(exc)


def hosting_prices(
    instance_types: list[str], region: str, *, aws: Aws
) -> dict[str, PriceQuote | None]:
    """The Hosting price of many instance types in one region: fresh cached quotes, and one
    paged Price List query for the region's Hosting products for the rest (not one per type).
    A type with no on-demand Hosting price in the region maps to None."""
    cache = _read_cache()
    found: dict[str, PriceQuote | None] = {}
    for instance_type in instance_types:
        try:
            cached = PriceQuote.model_validate(cache[f"{region}/{instance_type}"])
        except (KeyError, ValueError):
            continue
        if _fresh(cached):
            found[instance_type] = cached
    missing = [t for t in instance_types if t not in found]
    if not missing:
        return found
    filters = [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"},
    ]
    by_type: dict[str, list[str]] = {}
    with aws_errors("look up SageMaker Hosting prices", region, "pricing"):
        paginator = aws.pricing().get_paginator("get_products")
        for page in paginator.paginate(
            ServiceCode=SERVICE_CODE,
            Filters=filters,  # type: ignore[arg-type]
            FormatVersion="aws_v1",
        ):
            for raw in page.get("PriceList", []):
                try:
                    name = json.loads(raw)["product"]["attributes"]["instanceName"]
                except (ValueError, KeyError, TypeError):
                    continue
                by_type.setdefault(str(name), []).append(raw)
    cache = _read_cache()
    for instance_type in missing:
        quote = pick_hosting_price(by_type.get(instance_type, []), instance_type, region)
        found[instance_type] = quote
        if quote is not None:
            cache[f"{region}/{instance_type}"] = quote.model_dump()
    write_json_atomic(_cache_path(), cache)
    return found
