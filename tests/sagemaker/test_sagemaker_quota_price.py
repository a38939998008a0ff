"""quota and price over the wire: Service Quotas and the Price List API are a JSON-1.1 loopback
server of our own (moto has neither ListServiceQuotas nor Pricing); endpoints in use are moto's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import boto3
import pytest

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from tests.sagemaker_fakes import Injection

if TYPE_CHECKING:
    from tests.sagemaker_fakes import SageMakerProxy, World


NAME = "ml.g6.xlarge for endpoint usage"


def _endpoint(world: World, region: str, name: str, variant: dict[str, object]) -> None:
    """Someone's endpoint made with plain boto3 (not sagemeter's) to count as usage."""
    client = boto3.client("sagemaker", region_name=region)
    client.create_model(
        ModelName=name, ExecutionRoleArn=world.role, PrimaryContainer={"Image": "x"}
    )
    client.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {"VariantName": "v", "ModelName": name, "InitialInstanceCount": 1, **variant}
        ],  # type: ignore[list-item]
    )
    client.create_endpoint(EndpointName=name, EndpointConfigName=name)


def test_quota_pages_applied_values_falls_back_to_defaults_and_counts_usage(world: World) -> None:
    filler = [world.quota_item(f"ml.m5.{n}xlarge for endpoint usage", 4) for n in (2, 4, 8)]
    world.quotas.applied["us-east-2"] = [*filler, world.quota_item(NAME, 3, "L-G6X")]  # on page 2
    world.quotas.applied["us-east-1"] = filler
    world.quotas.defaults["us-east-1"] = [*filler, world.quota_item(NAME, 0, "L-G6X")]
    world.quotas.defaults["us-west-2"] = filler
    _endpoint(world, "us-east-2", "plain", {"InstanceType": "ml.g6.xlarge"})
    _endpoint(world, "us-east-2", "pooled", {"InstancePools": [
        {"InstanceType": "ml.g5.xlarge", "Priority": 1}, {"InstanceType": "ml.g6.xlarge", "Priority": 2}]})  # fmt: skip
    _endpoint(world, "us-east-2", "other", {"InstanceType": "ml.m5.large"})

    rows = {
        row.region: row for row in sm.quota("ml.g6.xlarge", ["us-east-2", "us-east-1", "us-west-2"])
    }
    east2 = rows["us-east-2"]
    assert (east2.quota, east2.quota_source, east2.quota_code) == (3.0, "applied", "L-G6X")
    assert east2.in_use == 2 and east2.free == 1.0  # the fallback list holds quota too
    east1 = rows["us-east-1"]
    assert (east1.quota, east1.quota_source, east1.in_use, east1.free) == (0.0, "default", 0, 0.0)
    assert rows["us-west-2"].quota is None and "no quota named" in (rows["us-west-2"].error or "")

    sent = [r for r in world.json_fake.requests if r["target"].startswith("ServiceQuotas")]
    assert all(r["body"]["ServiceCode"] == "sagemaker" for r in sent)
    assert all(r["service"] == "servicequotas" for r in sent)
    assert any(r["body"].get("NextToken") for r in sent)  # paging was followed
    assert {r["region"] for r in sent} == {"us-east-2", "us-east-1", "us-west-2"}


def test_quota_access_denied_is_a_row_error_naming_the_permission_and_keeps_the_count(
    world: World,
) -> None:
    """A refused quota read must not hide how many instances the region's endpoints hold."""
    world.json_fake.handlers["ServiceQuotasV20190624.ListServiceQuotas"] = lambda body: (
        400, {"__type": "AccessDeniedException", "message": "User is not authorized to perform servicequotas:ListServiceQuotas"}
    )  # fmt: skip
    _endpoint(world, "us-east-2", "plain", {"InstanceType": "ml.g6.xlarge"})
    [row] = sm.quota("ml.g6.xlarge", ["us-east-2"])
    assert row.quota is None and row.free is None
    assert "AWS denied servicequotas:ListServiceQuotas in us-east-2" in (row.error or "")
    assert row.in_use == 1


def _hosting_prices(world: World) -> None:
    world.prices.extend(
        [
            world.price_item(
                "ml.g6.xlarge", "us-east-2", "USE2-Train:ml.g6.xlarge", "Training", "1.0100000000"
            ),
            world.price_item(
                "ml.g6.xlarge", "us-east-2", "USE2-Notebk:ml.g6.xlarge", "Notebook", "1.0500000000"
            ),
            world.price_item(
                "ml.g6.xlarge", "us-east-2", "USE2-Host:ml.g6.xlarge", "Hosting", "1.1267000000"
            ),
            world.price_item(
                "ml.g6.xlarge", "us-west-2", "USW2-Host:ml.g6.xlarge", "Hosting", "1.2000000000"
            ),
        ]
    )


def test_price_is_real_time_hosting_on_demand_from_us_east_1_and_cached(world: World) -> None:
    _hosting_prices(world)
    quote = sm.hourly_price("ml.g6.xlarge", "us-east-2")
    assert quote.usd_per_hour == pytest.approx(1.1267)
    assert quote.usage_type == "USE2-Host:ml.g6.xlarge"
    assert "Hosting" in (quote.description or "")
    [request] = [
        r for r in world.json_fake.requests if r["target"] == "AWSPriceListService.GetProducts"
    ]
    assert request["region"] == "us-east-1" and request["service"] == "pricing"
    assert request["body"]["ServiceCode"] == "AmazonSageMaker"
    assert {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"} in request["body"][
        "Filters"
    ]

    world.json_fake.requests.clear()
    again = sm.hourly_price("ml.g6.xlarge", "us-east-2")
    assert again.usd_per_hour == quote.usd_per_hour and again.fetched_utc == quote.fetched_utc
    assert world.json_fake.requests == []  # answered from the cache, with its date
    cache = json.loads((world.home / "cache" / "sagemaker-prices.json").read_text())
    assert cache["us-east-2/ml.g6.xlarge"]["fetched_utc"] == quote.fetched_utc

    refreshed = sm.hourly_price("ml.g6.xlarge", "us-east-2", refresh=True)
    assert refreshed.usd_per_hour == pytest.approx(1.1267) and len(world.json_fake.requests) == 1


def test_price_override_wins_and_a_missing_price_says_what_to_do(world: World) -> None:
    quote = sm.hourly_price("ml.g6.xlarge", "us-east-2", price_per_hour=0.99)
    assert (quote.usd_per_hour, quote.source) == (0.99, "--price-per-hour")
    assert world.json_fake.requests == []
    with pytest.raises(
        UserError, match=r"no on-demand real-time Hosting price .* pass --price-per-hour"
    ):
        sm.hourly_price("ml.g6.2xlarge", "us-east-2")


def test_price_access_denied_is_one_line(world: World) -> None:
    world.json_fake.handlers["AWSPriceListService.GetProducts"] = lambda body: (
        400, {"__type": "AccessDeniedException", "message": "not authorized to perform: pricing:GetProducts"}
    )  # fmt: skip
    with pytest.raises(
        UserError, match=r"AWS denied pricing:GetProducts in us-east-2 .*docs/sagemaker.md#iam"
    ):
        sm.hourly_price("ml.g6.xlarge", "us-east-2", refresh=True)


def test_endpoints_that_cannot_be_read_are_said_not_silently_uncounted(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: DescribeEndpoint of one endpoint is denied; it is named in the row, and the count
    says it is a lower bound (a vanished endpoint, by contrast, is simply not counted)."""
    world.quotas.applied["us-east-2"] = [world.quota_item(NAME, 3, "L-G6X")]
    _endpoint(world, "us-east-2", "readable", {"InstanceType": "ml.g6.xlarge"})
    _endpoint(world, "us-east-2", "secret-one", {"InstanceType": "ml.g6.xlarge"})
    denied = "User: arn:aws:iam::123456789012:user/u is not authorized to perform: sagemaker:DescribeEndpoint"
    sagemaker_proxy.inject(
        "DescribeEndpoint", Injection(400, "AccessDeniedException", denied, match="secret-one")
    )
    [row] = sm.quota("ml.g6.xlarge", ["us-east-2"])
    assert row.in_use == 1 and row.error is None
    assert row.in_use_note is not None
    assert "secret-one (AccessDeniedException)" in row.in_use_note


def test_quota_without_regions_includes_the_configured_region(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`quota` with no region reads the usual GPU regions and the one AWS_REGION names, as `list`
    does, so the region a deploy would go to is never left out."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    world.quotas.applied["eu-west-1"] = [world.quota_item(NAME, 2, "L-G6X")]
    _endpoint(world, "eu-west-1", "plain", {"InstanceType": "ml.g6.xlarge"})

    rows = {row.region: row for row in sm.quota("ml.g6.xlarge")}
    assert sorted(rows) == ["eu-west-1", "us-east-1", "us-east-2", "us-west-2"]
    west1 = rows["eu-west-1"]
    assert (west1.quota, west1.in_use, west1.free) == (2.0, 1, 1.0)
    sent = [r for r in world.json_fake.requests if r["target"].startswith("ServiceQuotas")]
    assert "eu-west-1" in {r["region"] for r in sent}
