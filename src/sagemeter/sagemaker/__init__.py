"""The SageMaker backend: quota, price, role, deploy, wait, status, list, logs, invoke, delete.

Plain functions with typed parameters that return pydantic models and never print, so the CLI
and the MCP server call the same code. Every AWS failure surfaces as one `PlatformError` line.
"""

from sagemeter.sagemaker.aws import Aws
from sagemeter.sagemaker.delete import DeleteReport, DeleteStep, delete, delete_all_mine
from sagemeter.sagemaker.deploy import (
    Attempt,
    DeployResult,
    PlannedRegion,
    deploy,
    is_capacity_failure,
    plan_deploy,
)
from sagemeter.sagemaker.describe import deployment_info
from sagemeter.sagemaker.endpoint import Progress, ProgressCallback
from sagemeter.sagemaker.image import (
    DEFAULT_VLLM_TAG,
    FALLBACK_TAG,
    IMAGE_TABLE_SOURCE,
    ImageChoice,
    choose_image,
    vllm_image_uri,
)
from sagemeter.sagemaker.inventory import (
    EndpointInfo,
    Inventory,
    billing_lines,
    endpoint_price,
    endpoint_status,
    list_endpoints,
)
from sagemeter.sagemaker.invoke import invoke
from sagemeter.sagemaker.ledger import Ledger, LedgerRecord
from sagemeter.sagemaker.logs import (
    LogLine,
    LogsResult,
    follow_logs,
    log_group,
    recent_logs,
    startup_facts,
)
from sagemeter.sagemaker.pricing import PriceQuote, hourly_price
from sagemeter.sagemaker.quota import DEFAULT_QUOTA_REGIONS, QuotaRow, quota
from sagemeter.sagemaker.region import (
    RegionChoice,
    placed_elsewhere,
    resolve_endpoint_region,
    resolve_region,
)
from sagemeter.sagemaker.role import RoleDeleted, RoleResult, create_role, delete_role
from sagemeter.sagemaker.spec import DeploySpec, make_spec

__all__ = [
    "DEFAULT_QUOTA_REGIONS",
    "DEFAULT_VLLM_TAG",
    "FALLBACK_TAG",
    "IMAGE_TABLE_SOURCE",
    "Attempt",
    "Aws",
    "DeleteReport",
    "DeleteStep",
    "DeployResult",
    "DeploySpec",
    "EndpointInfo",
    "ImageChoice",
    "Inventory",
    "Ledger",
    "LedgerRecord",
    "LogLine",
    "LogsResult",
    "PlannedRegion",
    "PriceQuote",
    "Progress",
    "ProgressCallback",
    "QuotaRow",
    "RegionChoice",
    "RoleDeleted",
    "RoleResult",
    "billing_lines",
    "choose_image",
    "create_role",
    "delete",
    "delete_all_mine",
    "delete_role",
    "deploy",
    "deployment_info",
    "endpoint_price",
    "endpoint_status",
    "follow_logs",
    "hourly_price",
    "invoke",
    "is_capacity_failure",
    "list_endpoints",
    "log_group",
    "make_spec",
    "placed_elsewhere",
    "plan_deploy",
    "quota",
    "recent_logs",
    "resolve_endpoint_region",
    "resolve_region",
    "startup_facts",
    "vllm_image_uri",
]
