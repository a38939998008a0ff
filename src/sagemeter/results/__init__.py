"""The Result: the versioned, validated record of one measurement of one endpoint.

The top level keeps the source article's keys, so its minimal files load as they are; everything
raw (every timing, every answer, the environment) lives in the versioned `detail` section.
`model` is the schema, `files` writes and reads result files, `v1` reads schema 1's records,
`article` reads the source article's own result files.
"""

from sagemeter.evidence.bootstrap import Interval
from sagemeter.evidence.distribution import Spread
from sagemeter.results.files import (
    RESULT_NAME,
    check_result_name,
    load_result,
    result_path,
    save_result,
)
from sagemeter.results.model import (
    SCHEMA_VERSION,
    ClientShare,
    DecodeDetail,
    Detail,
    Environment,
    FigureSummary,
    LoadBatch,
    LoadDetail,
    LoadLevel,
    LongPromptLoad,
    MeasureResult,
    PrecisionStop,
    PrefillDetail,
    PrefixCacheCheck,
    QualityDetail,
    QualityItem,
    SequentialStop,
    Share,
    StartupFacts,
)

__all__ = [
    "RESULT_NAME",
    "SCHEMA_VERSION",
    "ClientShare",
    "DecodeDetail",
    "Detail",
    "Environment",
    "FigureSummary",
    "Interval",
    "LoadBatch",
    "LoadDetail",
    "LoadLevel",
    "LongPromptLoad",
    "MeasureResult",
    "PrecisionStop",
    "PrefillDetail",
    "PrefixCacheCheck",
    "QualityDetail",
    "QualityItem",
    "SequentialStop",
    "Share",
    "Spread",
    "StartupFacts",
    "check_result_name",
    "load_result",
    "result_path",
    "save_result",
]
