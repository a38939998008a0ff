"""New boto3 sessions that share botocore's parsed service models.

Why: every new botocore session parses each service's JSON model again when its first client is
made (SageMaker's model alone is about 1 MB of JSON). A command makes one session, but the MCP
server makes one per tool call, and a long run makes several: each paid that parse again (a
SageMaker client from a new session: 0.39 CPU-s, 0.05 with the shared parse, on a slow two-core
host: docs/benchmarks/start-up.md). The models are read-only files of the installed botocore and
boto3, so one parse per process is enough. Credentials, the profile and the region stay each
session's own; only the loader's cache of model files is shared, per `data_path` (AWS_DATA_PATH or
the profile's), since that setting decides which files are read.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3.session
    from botocore.loaders import Loader
    from botocore.model import ServiceModel

# data_path -> the model files read so far under it: botocore's Loader caches into `_cache`.
_MODEL_CACHES: dict[str | None, dict[Any, Any]] = {}
_LOCK = threading.Lock()


def _shared_loader(data_path: str | None) -> Loader:
    """botocore's own loader for `data_path`, with the process's cache of what it read."""
    from botocore.loaders import create_loader

    loader = create_loader(data_path)
    with _LOCK:  # `_cache` is where botocore's instance_cache keeps what a loader read
        loader._cache = _MODEL_CACHES.setdefault(data_path, {})  # type: ignore[attr-defined]
    return loader


def new_session(profile_name: str | None = None) -> boto3.session.Session:
    """`boto3.session.Session(profile_name=...)`, its model files read once per process."""
    import boto3.session  # heavy (s3transfer, botocore.session): only once a session is made
    import botocore.session

    core = botocore.session.get_session()
    core.lazy_register_component(
        "data_loader", lambda: _shared_loader(core.get_config_variable("data_path"))
    )
    return boto3.session.Session(botocore_session=core, profile_name=profile_name)


def service_model(service: str) -> ServiceModel:
    """botocore's model of `service` (the values its API accepts), from the process's one parse.

    A client carries it, and it is the same in every region; making the client asks nothing of
    AWS and needs no credentials."""
    client = new_session().client(service, region_name="us-east-1")  # type: ignore[call-overload]
    model: ServiceModel = client.meta.service_model
    return model
