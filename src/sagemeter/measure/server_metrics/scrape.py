"""One read of a server's Prometheus `/metrics`, parsed into counters, histograms and info labels.

Parsing is prometheus_client's own text parser. Label sets are summed per metric (a server
serves one model here); info metrics (`vllm:cache_config_info`) keep their labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from sagemeter.errors import UserError
from sagemeter.transport.client import HttpClient, TransportError


@dataclass
class Histogram:
    """A histogram summed over label sets: cumulative counts by upper bound, sum and count."""

    buckets: dict[float, float] = field(default_factory=dict)
    sum: float = 0.0
    count: float = 0.0


@dataclass
class Snapshot:
    """What `/metrics` said at one moment."""

    samples: dict[str, float] = field(default_factory=dict)  # counters and gauges, by name
    histograms: dict[str, Histogram] = field(default_factory=dict)  # by family name
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # info metrics' labels

    @property
    def engine(self) -> str | None:
        """vllm or llama.cpp, from the metric names; None for anything else."""
        names = [*self.samples, *self.histograms, *self.labels]
        if any(name.startswith("vllm:") for name in names):
            return "vllm"
        if any(name.startswith("llamacpp:") for name in names):
            return "llama.cpp"
        return None


def parse_metrics(text: str) -> Snapshot:
    """A Prometheus text page as a Snapshot; a page that is not one raises UserError."""
    snapshot = Snapshot()
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise UserError(f"/metrics is not Prometheus text: {exc}") from None
    for family in families:
        if family.type == "histogram":
            histogram = snapshot.histograms.setdefault(family.name, Histogram())
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    bound = float(sample.labels.get("le", "inf"))
                    histogram.buckets[bound] = histogram.buckets.get(bound, 0.0) + sample.value
                elif sample.name.endswith("_sum"):
                    histogram.sum += sample.value
                elif sample.name.endswith("_count"):
                    histogram.count += sample.value
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            if family.type == "info" or sample.name.endswith("_info"):
                snapshot.labels[sample.name] = dict(sample.labels)
                continue
            snapshot.samples[sample.name] = snapshot.samples.get(sample.name, 0.0) + sample.value
    return snapshot


async def scrape(http: HttpClient) -> Snapshot:
    """GET /metrics on `http` (based at the server root); any failure is one UserError line."""
    try:
        reply = await http.call_json("GET", "/metrics", timeout_s=10.0)
    except TransportError as exc:
        raise UserError(f"GET /metrics failed: {exc}") from None
    if reply.status != 200:
        raise UserError(f"GET /metrics answered HTTP {reply.status}")
    return parse_metrics(reply.text)
