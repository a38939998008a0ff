"""What a deployed endpoint runs: the model name vLLM serves, the image and its digest, the engine
version, the instance type SageMaker placed and its price.

The runtime client names the served model in each body, and `measure` records engine and model in
the result. The local record answers without a network call; otherwise the endpoint's config and
model are described. The container environment is read for two keys only and never returned
(it holds HF_TOKEN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from sagemeter.sagemaker.aws import CONTROL_CONFIG
from sagemeter.sagemaker.endpoint import deployed_image, placed_instance_types
from sagemeter.sagemaker.image import vllm_version
from sagemeter.sagemaker.ledger import Ledger
from sagemeter.transport.aws_session import new_session

if TYPE_CHECKING:
    import boto3.session


def _served_name(env: dict[str, Any], model_id: str | None) -> str | None:
    """vLLM serves `--served-model-name` when given (its first name), else the `--model` value."""
    served = str(env.get("SM_VLLM_SERVED_MODEL_NAME") or "").split()
    return served[0] if served else model_id


def _engine(image: str | None) -> dict[str, Any]:
    if not image:
        return {}
    version = vllm_version(image)
    info: dict[str, Any] = {"image": image}
    if "/vllm:" in image:
        info["engine"] = "vllm (AWS SageMaker container)"
    if version:
        info["engine_version"] = version
    return info


def deployment_info(
    name: str, region: str, *, session: boto3.session.Session | None = None
) -> dict[str, Any]:
    """Best effort, never raises.

    Keys: model (the name vLLM serves), model_id, image, image_digest, engine, engine_version,
    instance_types (those placed, when SageMaker says), and from the local record also
    image_source, instance_count, hourly_usd with the priced_instance_type it is for (or
    price_note, why there is none), max_model_len, gpu_memory_utilization, the user's extra
    container_env (secrets masked) and create_to_inservice_minutes.
    """
    record = Ledger().get(region, name)
    if record is not None and record.active:
        recorded_env = record.spec.get("env")
        env: dict[str, Any] = dict(recorded_env) if isinstance(recorded_env, dict) else {}
        info: dict[str, Any] = {
            "model": _served_name(env, record.model_id),
            "model_id": record.model_id,
            "instance_types": record.placed_instance_types or record.instance_types,
            "instance_count": record.count,
            "hourly_usd": record.hourly_usd,
            "priced_instance_type": record.priced_instance_type,
            "price_note": record.price_note,
            "image_source": record.image_source,
            "image_digest": record.image_digest,
            "max_model_len": record.spec.get("max_model_len"),
            "gpu_memory_utilization": record.spec.get("gpu_memory_utilization"),
            "container_env": env or None,
            "create_to_inservice_minutes": record.create_to_inservice_minutes,
            **_engine(record.image),
        }
        return {key: value for key, value in info.items() if value is not None}
    try:
        client = (session or new_session()).client(
            "sagemaker", region_name=region, config=CONTROL_CONFIG
        )
        endpoint: dict[str, Any] = dict(client.describe_endpoint(EndpointName=name))
        config = client.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
        variant = config["ProductionVariants"][0]
        model = client.describe_model(ModelName=variant["ModelName"])
    except (ClientError, BotoCoreError, KeyError, IndexError):
        return {}
    container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
    env = dict(container.get("Environment") or {})
    model_id = env.get("SM_VLLM_MODEL") or env.get("HF_MODEL_ID")
    types = (
        [variant["InstanceType"]]
        if variant.get("InstanceType")
        else [
            p["InstanceType"]
            for p in sorted(variant.get("InstancePools") or [], key=lambda p: p["Priority"])
        ]
    )
    described = {
        "model": _served_name(env, model_id),
        "model_id": model_id,
        "instance_types": placed_instance_types(endpoint) or types,
        "image_digest": deployed_image(endpoint),
        **_engine(container.get("Image")),
    }
    return {key: value for key, value in described.items() if value is not None}
