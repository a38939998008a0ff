"""AWS at the wire, on loopback, for the SageMaker tests (a pytest plugin: `pytest_plugins`).

- moto in server mode for SageMaker's control plane, CloudWatch Logs and IAM. moto is the
  stand-in for AWS, so where it lags AWS the tests drive it (never our code): its endpoint-config
  check knows no ml.g5/ml.g6 and no InstancePools, so it is widened to botocore's own enum; its
  endpoints are InService at once, so a test can make new ones start Creating, fail, or refuse to
  be created; like SageMaker it refuses to delete an endpoint that is still Creating; its
  DescribeEndpoint says nothing of DeployedImages or of the InstancePools type placed, so new
  endpoints get both (the image by digest, the placed type a test chooses); and its log streams'
  lastEventTimestamp is exact, so a test can make it lag as AWS's does.
- `SageMakerProxy`: a loopback AWS in front of moto that answers chosen calls with the errors AWS
  sends on the wire (a 500 after the call took effect, an eventually consistent "Could not find
  …", an access denial, IAM's NoSuchEntity for a role just made), relaying everything else to
  moto. It speaks JSON 1.1 (SageMaker) and the query protocol (IAM).
- `JsonFake`: a JSON-1.1 server for what moto lacks (Service Quotas' ListServiceQuotas, the Price
  List API, the Deep Learning Containers' ECR registry: DescribeImages across accounts),
  answering from per-test tables and recording every request with its SigV4 scope.
- `RuntimeFake`: the SageMaker runtime REST protocol (`/endpoints/NAME/invocations` and
  `/invocations-response-stream` with AWS event-stream framing) forwarding to the real embedded
  engine, cutting its bytes into parts that split and coalesce lines; an endpoint placed in one
  region is "not found" in every other, as the runtime says it.
"""

from __future__ import annotations

import binascii
import hashlib
import itertools
import json
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape as xml_escape

import boto3
import botocore.session
import httpx
import pytest
from moto.logs import models as moto_logs
from moto.sagemaker import models as moto_sagemaker
from moto.sagemaker.exceptions import SagemakerClientError
from moto.sagemaker.exceptions import ValidationError as MotoValidationError
from moto.server import ThreadedMotoServer

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/sagemeter-test-role"
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request")


# --------------------------------------------------------------------------- moto, driven


@dataclass
class MotoDriver:
    """What new endpoints do in this test, and what moto received from the wire."""

    initial_status: str = "InService"
    failure_reason: str | None = None
    create_endpoint_errors: dict[str, tuple[str, str]] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    on_create: Callable[[str, str, dict[str, Any]], None] | None = None
    # What DeleteEndpoint does instead of deleting: (status, failure reason), e.g. a delete
    # that fails ("Failed", why) or one that takes longer than the test waits ("Deleting", None).
    delete_outcome: tuple[str, str | None] | None = None
    # Region -> the InstancePools type SageMaker places (DescribeEndpoint's pool summary).
    placed_types: dict[str, str] = field(default_factory=dict)
    # AWS updates a stream's lastEventTimestamp lazily: with this set, a stream reports only the
    # value it had at the last `settle_log_times()` (none for a stream made since).
    lazy_log_times: bool = False
    settled_log_times: dict[str, int | None] = field(default_factory=dict)

    def backend(self, region: str) -> Any:
        return moto_sagemaker.sagemaker_backends[ACCOUNT][region]

    def endpoint(self, region: str, name: str) -> Any:
        return self.backend(region).endpoints[name]

    def set_status(self, region: str, name: str, status: str, reason: str | None = None) -> None:
        endpoint = self.endpoint(region, name)
        endpoint.endpoint_status = status
        endpoint.failure_reason = reason

    def requests(self, operation: str) -> list[dict[str, Any]]:
        return [params for op, _, params in self.calls if op == operation]

    def settle_log_times(self, region: str) -> None:
        """Let AWS catch up: every stream's lastEventTimestamp as it is now becomes visible."""
        for group in moto_logs.logs_backends[ACCOUNT][region].groups.values():
            for stream in group.streams.values():
                times = [event.timestamp for event in stream.events]
                self.settled_log_times[stream.arn] = max(times) if times else None

    def reset(self) -> None:
        self.initial_status = "InService"
        self.failure_reason = None
        self.create_endpoint_errors.clear()
        self.calls.clear()
        self.on_create = None
        self.delete_outcome = None
        self.placed_types.clear()
        self.lazy_log_times = False
        self.settled_log_times.clear()


DRIVER = MotoDriver()


def _known_types() -> set[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return set(model.shape_for("ProductionVariantInstanceType").enum)  # type: ignore[attr-defined]


def _patch_moto(patch: pytest.MonkeyPatch) -> None:
    known = _known_types()
    backend_cls = moto_sagemaker.SageMakerModelBackend

    def validate_variants(self: Any, variants: list[dict[str, Any]]) -> None:
        for variant in variants:
            types = (
                [variant["InstanceType"]]
                if "InstanceType" in variant
                else [pool["InstanceType"] for pool in variant.get("InstancePools", [])]
            )
            if not types or any(t not in known for t in types):
                raise MotoValidationError(message=f"invalid instance types {types}")

    # moto accepts a second create of the same name; SageMaker refuses it with these words.
    existing = {
        "create_model": ("model_name", "_models", "model"),
        "create_endpoint_config": ("endpoint_config_name", "endpoint_configs", "endpoint-config"),
        "create_endpoint": ("endpoint_name", "endpoints", "endpoint"),
    }
    spelled = {
        "model": "model",
        "endpoint-config": "endpoint configuration",
        "endpoint": "endpoint",
    }

    def recording(operation: str) -> Callable[..., Any]:
        original = getattr(backend_cls, operation)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            DRIVER.calls.append((operation, self.region_name, dict(kwargs)))
            if DRIVER.on_create:
                DRIVER.on_create(operation, self.region_name, dict(kwargs))
            key, table, kind = existing[operation]
            name = kwargs.get(key)
            if name in getattr(self, table):
                arn = f"arn:aws:sagemaker:{self.region_name}:{ACCOUNT}:{kind}/{name}"
                raise MotoValidationError(
                    message=f'Cannot create already existing {spelled[kind]} "{arn}".'
                )
            if operation == "create_endpoint":
                error = DRIVER.create_endpoint_errors.get(self.region_name)
                if error:
                    raise SagemakerClientError(*error)
            result = original(self, *args, **kwargs)
            if operation == "create_endpoint":
                result.endpoint_status = DRIVER.initial_status
                result.failure_reason = DRIVER.failure_reason
                _describe_like_sagemaker(self, result)
            return result

        return wrapper

    original_delete = backend_cls.delete_endpoint

    def delete_endpoint(self: Any, endpoint_name: str) -> None:
        endpoint = self.endpoints.get(endpoint_name)
        if endpoint is not None and endpoint.endpoint_status in {"Creating", "Updating"}:
            raise MotoValidationError(message=f"Cannot update in-progress endpoint {endpoint.arn}.")
        if endpoint is not None and DRIVER.delete_outcome is not None:
            endpoint.endpoint_status, endpoint.failure_reason = DRIVER.delete_outcome
            return
        original_delete(self, endpoint_name)

    original_describe = moto_logs.LogStream.to_describe_dict

    def describe_stream(self: Any) -> dict[str, Any]:
        described: dict[str, Any] = original_describe(self)
        if DRIVER.lazy_log_times:
            settled = DRIVER.settled_log_times.get(self.arn)
            if settled is None:
                described.pop("lastEventTimestamp", None)
            else:
                described["lastEventTimestamp"] = settled
        return described

    patch.setattr(moto_logs.LogStream, "to_describe_dict", describe_stream)
    patch.setattr(
        moto_sagemaker.FakeEndpointConfig, "validate_production_variants", validate_variants
    )
    for operation in ("create_model", "create_endpoint_config", "create_endpoint"):
        patch.setattr(backend_cls, operation, recording(operation))
    patch.setattr(backend_cls, "delete_endpoint", delete_endpoint)


def image_digest(image: str) -> str:
    """The digest the fake registry gives an image: the same for the same URI everywhere."""
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def _describe_like_sagemaker(backend: Any, endpoint: Any) -> None:
    """What DescribeEndpoint says and moto does not: the image resolved to its digest, and with
    InstancePools the type placed (the test's choice, else the first)."""
    config = backend.endpoint_configs[endpoint.endpoint_config_name]
    for summary, variant in zip(
        endpoint.production_variants, config.production_variants, strict=True
    ):
        model = backend._models.get(variant["ModelName"])
        image = (model.primary_container or {}).get("Image") if model else None
        if image and "/" in image:
            repository = image.rsplit(":", 1)[0]
            summary["DeployedImages"] = [
                {"SpecifiedImage": image, "ResolvedImage": f"{repository}@{image_digest(image)}"}
            ]
        pools = variant.get("InstancePools") or []
        if pools:
            placed = DRIVER.placed_types.get(backend.region_name, pools[0]["InstanceType"])
            summary["InstancePools"] = [
                {"InstanceType": placed, "CurrentInstanceCount": variant["InitialInstanceCount"]}
            ]


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        _patch_moto(patch)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


# --------------------------------------------------------------------------- proxy to moto


@dataclass
class Injection:
    """One AWS error answered on the wire instead of (or after) moto's own answer."""

    status: int
    code: str
    message: str
    forward: bool = False  # moto serves the call first (it takes effect), then the error is sent
    match: str | None = None  # only a request whose body contains this text


def not_found(what: str, name: str, region: str = "us-east-2") -> Injection:
    """SageMaker's eventually consistent 'Could not find …' (a ValidationException, HTTP 400)."""
    arn = f"arn:aws:sagemaker:{region}:{ACCOUNT}:{what.replace(' ', '-')}/{name}"
    return Injection(400, "ValidationException", f'Could not find {what} "{arn}".', match=name)


class LoopbackServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 whose POSTs go to `self.handle`; subclasses
    set up their state, then call `super().__init__()` to start serving."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY, as a streaming server sets it: with Nagle on, a small write waits for
            # the ACK of the one before, which a keep-alive client delays (tens of ms).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                owner.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SageMakerProxy(LoopbackServer):
    """A loopback SageMaker (JSON 1.1) in front of moto's server that injects chosen answers.

    `inject("CreateModel", Injection(...), ...)` queues answers for that operation; each is used
    once, in order, for the next matching request; everything else is moto's answer, relayed.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules: dict[str, list[Injection]] = {}
        self.operations: list[str] = []
        self._lock = threading.Lock()
        super().__init__()

    def inject(self, operation: str, *injections: Injection) -> None:
        with self._lock:
            self.rules.setdefault(operation, []).extend(injections)

    def reset(self) -> None:
        with self._lock:
            self.rules.clear()
            self.operations.clear()

    def _take(self, operation: str, body: bytes) -> Injection | None:
        with self._lock:
            self.operations.append(operation)
            queue = self.rules.get(operation, [])
            for index, rule in enumerate(queue):
                if rule.match is None or rule.match.encode() in body:
                    return queue.pop(index)
        return None

    def _forward(self, request: BaseHTTPRequestHandler, body: bytes) -> httpx.Response:
        skip = {"host", "content-length", "connection", "accept-encoding"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        return httpx.post(self.upstream + request.path, content=body, headers=headers, timeout=60)

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("Content-Length", 0)))
        target = request.headers.get("X-Amz-Target")
        query = None if target else parse_qs(body.decode())
        operation = target.rsplit(".", 1)[-1] if target else (query or {}).get("Action", [""])[0]
        rule = self._take(operation, body)
        if rule is None or rule.forward:
            upstream = self._forward(request, body)
            if rule is None:
                self._send(request, upstream.status_code, upstream.content, upstream.headers)
                return
        if query is not None:  # the query protocol (IAM) answers errors in XML
            data = (
                "<ErrorResponse><Error><Type>Sender</Type>"
                f"<Code>{rule.code}</Code><Message>{xml_escape(rule.message)}</Message></Error>"
                "<RequestId>sagemeter-test</RequestId></ErrorResponse>"
            ).encode()
            self._send(request, rule.status, data, {"Content-Type": "text/xml"})
            return
        data = json.dumps({"__type": rule.code, "message": rule.message}).encode()
        self._send(request, rule.status, data, {"Content-Type": "application/x-amz-json-1.1"})

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, status: int, data: bytes, headers: Any) -> None:
        request.send_response(status)
        for key, value in headers.items():
            if key.lower() not in {"content-length", "transfer-encoding", "connection", "date",
                                   "server", "content-encoding"}:  # fmt: skip
                request.send_header(key, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)


@pytest.fixture(scope="session")
def _sagemaker_proxy_server(moto_url: str) -> Iterator[SageMakerProxy]:
    proxy = SageMakerProxy(moto_url)
    yield proxy
    proxy.close()


@pytest.fixture
def sagemaker_proxy(
    world: World, _sagemaker_proxy_server: SageMakerProxy, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SageMakerProxy]:
    """SageMaker's control plane and IAM through the injecting proxy, for this test only."""
    _sagemaker_proxy_server.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", _sagemaker_proxy_server.url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_IAM", _sagemaker_proxy_server.url)
    yield _sagemaker_proxy_server
    _sagemaker_proxy_server.reset()


# --------------------------------------------------------------------------- JSON 1.1 fake


class JsonFake(LoopbackServer):
    """A JSON-1.1 AWS service: `X-Amz-Target` picks the handler; every request is recorded."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]] = {}
        self.requests: list[dict[str, Any]] = []
        super().__init__()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = json.loads(request.rfile.read(int(request.headers["Content-Length"])) or b"{}")
        target = request.headers.get("X-Amz-Target", "")
        scope = _SCOPE.search(request.headers.get("Authorization", ""))
        self.requests.append(
            {
                "target": target,
                "body": body,
                "content_type": request.headers.get("Content-Type"),
                "region": scope["region"] if scope else None,
                "service": scope["service"] if scope else None,
            }
        )
        handler = self.handlers.get(target)
        if handler is None:
            status, payload = (
                400,
                {"__type": "UnknownOperationException", "message": target},
            )
        else:
            status, payload = handler(body)
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/x-amz-json-1.1")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)


def paged(items: list[Any], body: dict[str, Any], key: str, size: int = 2) -> dict[str, Any]:
    """One page of `items` after the request's NextToken, with a NextToken when more remain."""
    start = int(body.get("NextToken") or 0)
    page: dict[str, Any] = {key: items[start : start + size]}
    if start + size < len(items):
        page["NextToken"] = str(start + size)
    return page


@dataclass
class QuotaTables:
    applied: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    defaults: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def quota_item(name: str, value: float, code: str = "L-TEST") -> dict[str, Any]:
    return {
        "ServiceCode": "sagemaker",
        "ServiceName": "Amazon SageMaker",
        "QuotaName": name,
        "QuotaCode": code,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def price_item(instance: str, region: str, usage: str, component: str, usd: str) -> str:
    """One PriceList entry as the Price List API returns it: a JSON document in a string."""
    return json.dumps(
        {
            "product": {
                "productFamily": "ML Instance",
                "attributes": {
                    "instanceName": instance,
                    "regionCode": region,
                    "usagetype": usage,
                    "component": component,
                    "servicecode": "AmazonSageMaker",
                },
                "sku": f"SKU{abs(hash(usage)) % 10**8}",
            },
            "serviceCode": "AmazonSageMaker",
            "terms": {
                "OnDemand": {
                    "SKU.JRTCKXETXF": {
                        "effectiveDate": "2026-09-01T00:00:00Z",
                        "priceDimensions": {
                            "SKU.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "description": f"${usd} per {component} {instance} hour",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                    }
                }
            },
            "publicationDate": "2026-09-20T00:00:00Z",
        }
    )


# The vLLM repository as the article found it on 2026-09-25 (tags from the Deep Learning Containers
# release data): floating tags move with each rebuild; the pinned ones (`-sagemaker-vA.B`) do not.
# The 0.27.1 v1.3 rebuild was pushed last: the newest by date is not the newest release.
ARTICLE_REGISTRY: list[tuple[list[str], str]] = [
    (["0.26.0-gpu-py312-cu130-ubuntu22.04-sagemaker-v1.0"], "2026-07-01T00:00:00Z"),
    (["0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker-v1.2"], "2026-08-01T00:00:00Z"),
    (["0.29.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.0"], "2026-08-20T00:00:00Z"),
    (["0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.0"], "2026-09-05T00:00:00Z"),
    (
        [
            "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1",
            "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker",
            "0.30-gpu-py312-cu130-ubuntu24.04-sagemaker-v1",
        ],
        "2026-09-15T00:00:00Z",
    ),
    (["0.30.0-gpu-py312"], "2026-09-15T00:00:00Z"),
    (
        [
            "0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker-v1.3",
            "0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker",
        ],
        "2026-09-20T00:00:00Z",
    ),
]
ARTICLE_IMAGE_TAG = "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1"


def registry_images(
    account: str, region: str, tags: list[tuple[list[str], str]]
) -> list[dict[str, Any]]:
    """ECR ImageDetails for a repository holding `tags` (each group one image, pushed then)."""
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    images = []
    for group, pushed in tags:
        uri = f"{account}.dkr.ecr.{region}.{domain}/vllm:{group[0]}"
        images.append(
            {
                "registryId": account,
                "repositoryName": "vllm",
                "imageDigest": image_digest(uri),
                "imageTags": group,
                "imagePushedAt": pushed,
            }
        )
    return images


@dataclass
class Registry:
    """The Deep Learning Containers' ECR, per (account, region): its vllm repository's images."""

    images: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def article(self, *regions: str, account: str = "763104351884") -> None:
        for region in regions:
            self.images[(account, region)] = registry_images(account, region, ARTICLE_REGISTRY)


def install_json_handlers(
    fake: JsonFake, quotas: QuotaTables, prices: list[str], registry: Registry | None = None
) -> None:
    def region_of() -> str:
        return str(fake.requests[-1]["region"])

    def list_applied(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, paged(quotas.applied.get(region_of(), []), body, "Quotas")

    def list_defaults(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, paged(quotas.defaults.get(region_of(), []), body, "Quotas")

    def get_products(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        def matches(raw: str) -> bool:
            attributes = json.loads(raw)["product"]["attributes"]
            return all(
                attributes.get(f["Field"]) == f["Value"]
                for f in body.get("Filters", [])
                if f["Type"] == "TERM_MATCH"
            )

        page = paged([p for p in prices if matches(p)], body, "PriceList", size=1)
        return 200, {"FormatVersion": "aws_v1", **page}

    def describe_images(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        key = (str(body.get("registryId")), region_of())
        if registry is None or key not in registry.images or body.get("repositoryName") != "vllm":
            return 400, {
                "__type": "RepositoryNotFoundException",
                "message": f"The repository with name '{body.get('repositoryName')}' does not "
                f"exist in the registry with id '{body.get('registryId')}'",
            }
        images = registry.images[key]
        wanted = {i.get("imageTag") for i in body.get("imageIds") or []}
        if wanted:
            found = [i for i in images if wanted & set(i["imageTags"])]
            if not found:
                return 400, {"__type": "ImageNotFoundException", "message": "image not found"}
            return 200, {"imageDetails": found}
        page = paged(images, {"NextToken": body.get("nextToken")}, "imageDetails", size=3)
        return 200, {"imageDetails": page["imageDetails"], "nextToken": page.get("NextToken")}

    fake.handlers = {
        "ServiceQuotasV20190624.ListServiceQuotas": list_applied,
        "ServiceQuotasV20190624.ListAWSDefaultServiceQuotas": list_defaults,
        "AWSPriceListService.GetProducts": get_products,
        "AmazonEC2ContainerRegistry_V20150921.DescribeImages": describe_images,
    }


@pytest.fixture(scope="session")
def json_fake() -> Iterator[JsonFake]:
    fake = JsonFake()
    yield fake
    fake.close()


# --------------------------------------------------------------------------- runtime fake


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
    )


def event_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude, prelude CRC, headers, payload, message CRC."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    return event_message(
        {
            ":event-type": "PayloadPart",
            ":content-type": "application/octet-stream",
            ":message-type": "event",
        },
        data,
    )


def stream_exception(kind: str, message: str) -> bytes:
    body = {"Message": message}
    if kind == "ModelStreamError":
        body["ErrorCode"] = "ModelStreamError"
    return event_message(
        {
            ":exception-type": kind,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps(body).encode(),
    )


def _to_jsonlines(sse: bytes) -> bytes:
    """vLLM's SSE rewritten as LMI's bare JSON lines (the same chunk objects, no `data:`)."""
    lines = [line[5:].strip() for line in sse.split(b"\n") if line.startswith(b"data:")]
    return b"".join(line + b"\n" for line in lines if line != b"[DONE]")


def _to_tgi_lines(sse: bytes) -> bytes:
    """vLLM's SSE rewritten as TGI-style token lines, as LMI's default streaming schema sends."""
    out, text, tokens, finish = [], "", 0, "stop"
    for line in sse.split(b"\n"):
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            continue
        event = json.loads(line[5:])
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") or ""
            finish = choice.get("finish_reason") or finish
            if piece:
                tokens += 1
                text += piece
                out.append({"token": {"id": tokens, "text": piece, "logprob": 0.0}})
    out.append({"token": {"id": 0, "text": "", "special": True}, "generated_text": text,
                "details": {"finish_reason": finish, "generated_tokens": tokens}})  # fmt: skip
    return b"".join(json.dumps(o).encode() + b"\n" for o in out)


CUTS = ("cut-mid-reply", "stall-mid-reply")  # the runtime fake's streams that never end


class RuntimeFake(LoopbackServer):
    """SageMaker runtime on loopback. `behaviour[name]` picks what an endpoint does: `engine`
    (forward to the embedded engine), `throttle-once`, `model-error`, `not-found`, `jsonlines`,
    `tgi-lines`, `model-stream-error`, `internal-stream-failure`, and two connections dropped as
    a network or a crashed container drops them: `close-before-answer-once` (the next request
    is met by a close before any byte of an answer; the one after is served) and
    `cut-mid-reply` (the answer's status line and headers, then `cut_after_parts` event-stream
    parts, or half of a whole reply's body, then a close without the rest); `stall-mid-reply`
    falls silent for `stall_s` after `cut_after_parts` parts first. The first `spared`
    requests to each endpoint are served whatever its behaviour (a preflight passes, and what
    follows meets the behaviour).

    As SageMaker's front end does, it answers only once the engine has: its status line waits
    for the engine's (an engine error is a ModelError, as SageMaker says it), and a request lost
    on a kept-alive engine connection the engine had closed goes once more on a new connection
    (`upstream_resent` counts them) instead of cutting the reply."""

    def __init__(self, engine_url: str) -> None:
        self.engine_url = engine_url.rstrip("/")
        self.behaviour: dict[str, str] = {}
        self.placed: dict[str, str] = {}  # endpoint name -> the one region it runs in
        self.requests: list[dict[str, Any]] = []
        self.connections: set[int] = set()
        self._settings_as_new()
        self._lock = threading.Lock()
        # One client, its connections kept alive, as SageMaker's front end keeps its own to the
        # container: a new httpx client per request (its TLS context alone ~15 ms of CPU) and a
        # new connection put 18-44 ms between the fake and the engine, varying by request on a
        # busy host, and a timing test read that as the engine's.
        self.upstream = httpx.Client(
            timeout=60, limits=httpx.Limits(max_connections=None, max_keepalive_connections=256)
        )
        # A request a kept connection lost goes again on a connection of its own (never kept,
        # so never one the engine closed while it was idle).
        self.fresh_upstream = httpx.Client(
            timeout=60, limits=httpx.Limits(max_keepalive_connections=0)
        )
        super().__init__()

    def close(self) -> None:
        super().close()
        self.upstream.close()
        self.fresh_upstream.close()

    def _settings_as_new(self) -> None:
        """The knobs a test may turn, as a new fake has them."""
        self.part_sizes: list[int] = [1, 3, 7, 19, 400]
        self.cut_after_parts = 6
        self.stall_s = 1.0
        self.spared = 0
        self.upstream_resent = 0

    def reset(self) -> None:
        self.behaviour.clear()
        self.placed.clear()
        self.requests.clear()
        self.connections.clear()
        self._settings_as_new()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        match = re.fullmatch(
            r"/endpoints/(?P<name>[^/]+)/(?P<op>invocations(?:-response-stream)?)", request.path
        )
        body = request.rfile.read(int(request.headers.get("Content-Length", 0)))
        scope = _SCOPE.search(request.headers.get("Authorization", ""))
        self.connections.add(request.client_address[1])
        if match is None:
            self._json(request, 404, {"message": "no such path"}, "UnknownOperationException")
            return
        name = match["name"]
        with self._lock:
            self.requests.append(
                {
                    "name": name,
                    "op": match["op"],
                    "body": json.loads(body),
                    "content_type": request.headers.get("Content-Type"),
                    "region": scope["region"] if scope else None,
                    "service": scope["service"] if scope else None,
                    "at": time.time(),  # when it arrived: SageMaker counts invocations by minute
                }
            )
            spared = sum(1 for each in self.requests if each["name"] == name) <= self.spared
        behaviour = "engine" if spared else self.behaviour.get(name, "engine")
        if name in self.placed and scope and scope["region"] != self.placed[name]:
            behaviour = "not-found"
        if behaviour == "throttle-once":
            self.behaviour[name] = "engine"  # the next request is served
            self._json(request, 400, {"message": "Rate exceeded"}, "ThrottlingException")
            return
        if behaviour == "close-before-answer-once":
            self.behaviour[name] = "engine"  # the next request is served
            request.close_connection = True  # nothing written: the client reads an end of file
            return
        if behaviour == "model-error":
            self._model_error(request, 400, b"bad request")
            return
        if behaviour == "not-found":
            self._json(
                request,
                400,
                {"message": f"Endpoint {name} of account {ACCOUNT} not found."},
                "ValidationError",
            )
            return
        upstream = self._engine_answer(request, body)
        if upstream is None:
            return
        try:
            if upstream.status_code != 200:
                self._model_error(request, upstream.status_code, upstream.read())
            elif match["op"] == "invocations":
                self._whole(request, upstream.read(), behaviour)
            else:
                self._stream(request, upstream, behaviour)
        finally:
            upstream.close()

    def _engine_answer(self, request: BaseHTTPRequestHandler, body: bytes) -> httpx.Response | None:
        """The engine's response with its status and headers read (the caller reads the body
        and closes it), or None once the fake has answered the engine's silence itself.

        A kept-alive connection the engine closed just as the request went out (llama.cpp closes
        idle ones) ends before any byte of an answer: the engine never took that request, so it
        goes once more on a new connection, as any proxy sends it."""
        url = f"{self.engine_url}/chat/completions"
        try:
            try:
                return self.upstream.send(
                    self.upstream.build_request("POST", url, content=body), stream=True
                )
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                with self._lock:
                    self.upstream_resent += 1
                return self.fresh_upstream.send(
                    self.fresh_upstream.build_request("POST", url, content=body), stream=True
                )
        except httpx.HTTPError as exc:
            message = f"the model container did not answer: {type(exc).__name__}: {exc}"
            self._json(request, 500, {"message": message}, "InternalFailure")
            return None

    def _model_error(self, request: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
        """The engine's error answer as SageMaker relays it: ModelError (424) naming its status."""
        kind = "client" if status < 500 else "server"
        text = data.decode("utf-8", "replace")[:500]
        self._json(
            request,
            424,
            {
                "ErrorCode": f"{kind.upper()}_ERROR_FROM_MODEL",
                "Message": f'Received {kind} error ({status}) from primary with message "{text}"',
                "OriginalStatusCode": status,
            },
            "ModelError",
        )

    def _json(
        self, request: BaseHTTPRequestHandler, status: int, payload: dict[str, Any], kind: str
    ) -> None:
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header(
            "X-Amzn-ErrorType", f"{kind}:http://internal.amazon.com/coral/com.amazon.sagemaker/"
        )
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _whole(self, request: BaseHTTPRequestHandler, data: bytes, behaviour: str) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("x-Amzn-Invoked-Production-Variant", "AllTraffic")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if behaviour == "cut-mid-reply":
            request.wfile.write(data[: len(data) // 2])
            request.close_connection = True  # the rest never comes: the connection ends
            return
        request.wfile.write(data)

    def _stream(
        self, request: BaseHTTPRequestHandler, upstream: httpx.Response, behaviour: str
    ) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/vnd.amazon.eventstream")
        request.send_header("X-Amzn-SageMaker-Content-Type", "text/event-stream")
        request.send_header("Transfer-Encoding", "chunked")
        request.end_headers()

        def chunk(data: bytes) -> None:
            request.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        sizes = itertools.cycle(self.part_sizes)
        pending = b""
        parts = 0
        try:
            if behaviour in {"jsonlines", "tgi-lines"}:
                whole = upstream.read()
                source: Iterator[bytes] = iter(
                    [(_to_jsonlines if behaviour == "jsonlines" else _to_tgi_lines)(whole)]
                )
            else:
                source = upstream.iter_raw()
            for data in source:
                pending += data
                while pending:
                    if behaviour in CUTS and parts >= self.cut_after_parts:
                        if behaviour == "stall-mid-reply":
                            time.sleep(self.stall_s)
                        request.close_connection = True  # no end chunk: the connection ends
                        return
                    size = next(sizes)
                    if len(pending) < size and size < 400:
                        break
                    piece, pending = pending[:size], pending[size:]
                    chunk(payload_part(piece))
                    parts += 1
                    if (
                        behaviour in {"model-stream-error", "internal-stream-failure"}
                        and parts >= 12
                    ):
                        kind = (
                            "ModelStreamError"
                            if behaviour == "model-stream-error"
                            else "InternalStreamFailure"
                        )
                        chunk(stream_exception(kind, f"{kind} injected after {parts} parts"))
                        request.wfile.write(b"0\r\n\r\n")
                        return
        except httpx.HTTPError as exc:  # the engine's stream broke: SageMaker says so in-stream
            message = f"the model container's stream broke: {type(exc).__name__}: {exc}"
            chunk(stream_exception("ModelStreamError", message))
            request.wfile.write(b"0\r\n\r\n")
            return
        if pending:
            chunk(payload_part(pending))
        request.wfile.write(b"0\r\n\r\n")


@pytest.fixture(scope="session")
def runtime_fake(engine_url: str) -> Iterator[RuntimeFake]:
    fake = RuntimeFake(engine_url)
    yield fake
    fake.close()


# --------------------------------------------------------------------------- the world


@dataclass
class World:
    """Everything a SageMaker test talks to, and how to steer it."""

    moto: MotoDriver
    quotas: QuotaTables
    prices: list[str]
    registry: Registry
    json_fake: JsonFake
    home: Path
    role: str = ROLE
    quota_item = staticmethod(quota_item)
    price_item = staticmethod(price_item)

    def ledger_files(self) -> list[Path]:
        return sorted((self.home / "state" / "sagemaker").rglob("*.json"))


def aws_test_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto_url: str, json_url: str
) -> None:
    """Fake credentials and loopback endpoints, for this test only."""
    for name in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "HF_TOKEN",
        "AWS_ENDPOINT_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    # As the trial had it: AWS_REGION names us-east-2, the profile us-west-2, and
    # AWS_DEFAULT_REGION is unset, so anything that left the region to botocore would go west.
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    config = tmp_path / "aws-config"
    config.write_text("[default]\nregion = us-west-2\n")
    settings = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing-secret",
        "AWS_REGION": "us-east-2",
        "AWS_CONFIG_FILE": str(config),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL_SAGEMAKER": moto_url,
        "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS": moto_url,
        "AWS_ENDPOINT_URL_CLOUDWATCH": moto_url,
        "AWS_ENDPOINT_URL_SERVICE_QUOTAS": json_url,
        "AWS_ENDPOINT_URL_PRICING": json_url,
        "AWS_ENDPOINT_URL_ECR": json_url,
        "AWS_ENDPOINT_URL_IAM": moto_url,
        "SAGEMETER_ROLE_ARN": ROLE,
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def world(
    moto_url: str,
    json_fake: JsonFake,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    isolated_home: Path,
) -> Iterator[World]:
    httpx.post(f"{moto_url}/moto-api/reset")
    DRIVER.reset()
    aws_test_environment(monkeypatch, tmp_path, moto_url, json_fake.url)
    quotas = QuotaTables()
    prices: list[str] = []
    registry = Registry()
    registry.article("us-east-1", "us-east-2", "us-west-2")
    json_fake.requests.clear()
    install_json_handlers(json_fake, quotas, prices, registry)
    yield World(
        moto=DRIVER,
        quotas=quotas,
        prices=prices,
        registry=registry,
        json_fake=json_fake,
        home=isolated_home,
    )
    DRIVER.reset()


@pytest.fixture
def runtime(
    world: World, runtime_fake: RuntimeFake, monkeypatch: pytest.MonkeyPatch
) -> RuntimeFake:
    runtime_fake.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", runtime_fake.url)
    return runtime_fake


def plain_endpoint(name: str, region: str, instance_type: str = "ml.g6.xlarge") -> None:
    """Someone else's endpoint, made with plain boto3: no sagemeter tag, no record here."""
    client = boto3.client("sagemaker", region_name=region)
    client.create_model(
        ModelName=name,
        ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
        PrimaryContainer={"Image": "x"},
    )
    client.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "v",
                "ModelName": name,
                "InstanceType": instance_type,
                "InitialInstanceCount": 1,
            }
        ],
    )
    client.create_endpoint(EndpointName=name, EndpointConfigName=name)
