"""The SLO search's options, declared once: a plan's `[slo]` table is `SloOptions` itself, the MCP
tool `find_operating_point`'s arguments are made from its fields (their MCP names, milliseconds
for the latency targets), and `sagemeter load`'s SLO flags are its fields `ttft`, `tpot` and
`percentile` (`sagemeter.options.load` takes them). `Opt.setting` is the load generator's setting
(`sagemeter.loadgen.settings.LoadSettings`) each option sets; the search itself is
`sagemeter.measure.slo`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from sagemeter.bounds import MAX_RATE, MAX_STREAMS, MAX_TOKENS, MAX_WAIT_S, SLO_PERCENTILES
from sagemeter.calibrate.timing import parse_duration
from sagemeter.errors import UserError
from sagemeter.loadgen.lengths import parse_lengths
from sagemeter.options.base import Opt, OptionsModel, Text
from sagemeter.options.checked import Checked
from sagemeter.options.command import Command

DEFAULT_CEILING = 64
# A latency target: seconds in a plan (or "500ms"), milliseconds over MCP.
TARGET: dict[str, Any] = {
    "unit": 'seconds, or e.g. "500ms"',
    "mcp_unit": "ms",
    "mcp_scale": 1000,
    "refuse": "give a positive duration, e.g. 200ms",
}
SECONDS: dict[str, Any] = {"unit": 'seconds, or e.g. "5s"', "mcp_unit": "seconds"}
PICK = "give 50, 90 or 99 (the percentiles a load result carries)"
# A duration a plan or the command line may write as text: 500ms, 10s, 3m.
SECONDS_TEXT = Text(parse_duration, unit="s")


def check_percentile(value: float, label: str) -> None:
    """One of the percentiles every load result carries (`SLO_PERCENTILES`)."""
    if value not in SLO_PERCENTILES:
        raise UserError(f"{label} {value:g}: {PICK}")


class SloOptions(OptionsModel):
    """`[slo]`: the latency target every arm is searched against (and the probes' workload)."""

    TABLE: ClassVar[str] = "slo"

    ttft: Annotated[
        float | None,
        SECONDS_TEXT,
        Opt("slo_ttft_s", cli="--slo-ttft", mcp="slo_ttft_ms", **TARGET, unset="no TTFT target"),
    ] = Field(None, gt=0, le=MAX_WAIT_S, description="TTFT SLO: {unit}")
    tpot: Annotated[
        float | None,
        SECONDS_TEXT,
        Opt("slo_tpot_s", cli="--slo-tpot", mcp="slo_tpot_ms", **TARGET, unset="no TPOT target"),
    ] = Field(None, gt=0, le=MAX_WAIT_S, description="TPOT SLO: {unit}")
    percentile: Annotated[
        float,
        Checked(check_percentile),
        Opt("slo_percentile", cli="--slo-percentile", refuse=PICK),
    ] = Field(99.0, description="the percentile every SLO holds at: 50, 90 or 99")
    max_tokens: Annotated[int, Opt("max_tokens")] = Field(
        256, ge=1, le=MAX_TOKENS, description="tokens asked per reply in the probes"
    )
    search: Annotated[Literal["concurrency", "rate"], Opt("search")] = Field(
        "concurrency",
        description="raise streams at once (up to {concurrency}), or Poisson requests per "
        "second (from {rate})",
    )
    concurrency: Annotated[int, Opt("concurrency", mcp="max_concurrency")] = Field(
        DEFAULT_CEILING, ge=1, le=MAX_STREAMS, description="the highest streams at once searched"
    )
    rate: Annotated[float | None, Opt("rate", mcp="start_rate", unset="none")] = Field(
        None, gt=0, le=MAX_RATE, description="{search} = rate: the first rate tried"
    )
    duration: Annotated[float, SECONDS_TEXT, Opt("duration_s", mcp="min_probe_s", **SECONDS)] = (
        Field(10.0, gt=0, le=MAX_WAIT_S, description="the shortest probe: {unit}")
    )
    input_tokens: Annotated[str | None, Opt("input_tokens", unset="the one prompt")] = Field(
        None,
        description="prompt lengths drawn per request (the server's tokens): fixed:N, "
        'uniform:A,B, normal:MEAN,SD or lognormal:MEAN,SD, e.g. "lognormal:800,400"',
    )
    output_tokens: Annotated[str | None, Opt("output_tokens", unset="max_tokens each")] = Field(
        None, description='reply lengths drawn per request, the same forms, e.g. "uniform:32,256"'
    )
    burstiness: Annotated[float, Opt("burstiness")] = Field(
        1.0,
        gt=0,
        le=1000,
        description="{search} = rate: gamma shape of the gaps between arrivals; 1 is Poisson, "
        "<1 burstier",
    )

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _lengths(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_lengths(value, "")
            except UserError as exc:
                raise ValueError(str(exc).strip()) from None
        return value

    @model_validator(mode="after")
    def _complete(self) -> SloOptions:
        # Options named `{field}`: each face spells them (`slo_ttft_ms` over MCP, `ttft` in a plan).
        if self.ttft is None and self.tpot is None:
            raise ValueError("give {ttft}, {tpot} or both (the latency target searched against)")
        if self.search == "rate" and self.rate is None:
            raise ValueError("{search} = rate starts at `{rate}`: give the first rate to try")
        if self.burstiness != 1.0 and self.search != "rate":
            raise ValueError("{burstiness} shapes the arrivals of {search} = rate")
        return self

    def load_fields(self) -> dict[str, Any]:
        """These options as the load generator's settings (`load_fields`)."""
        return load_fields(self.model_dump())


def load_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Options by name (the model's units) as the load generator's settings, each under its
    `Opt.setting`; the first rate only for search = rate."""
    fields = {
        option.setting: values[option.name]
        for option in SloOptions.options()
        if option.setting is not None and option.name in values
    }
    if fields.get("search") != "rate":
        fields["rate"] = None
    return fields


def _load_defaults() -> BaseModel:
    from sagemeter.loadgen.settings import LoadSettings

    return LoadSettings(target="http://127.0.0.1:1")


# The faces' view of the options: each one's help as a face spells it, with its default.
SLO = Command("slo", models=(SloOptions,), defaults=_load_defaults)
