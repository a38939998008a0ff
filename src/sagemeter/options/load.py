"""`sagemeter load`'s options, declared once: the command's flags are made from `LoadOptions`
(`sagemeter.options.faces.with_options`), its SLO flags are the SLO search's own options
(`SloOptions`' `ttft`, `tpot` and `percentile`: the same type, bounds, setting and flag, with
load's words), and the MCP tool `find_operating_point` takes its price from here.

`Opt.setting` is the load generator's setting (`sagemeter.loadgen.settings.LoadSettings`) an
option sets. Every bound of one value is here, and only here; the checks that weigh several
options together (`--search` needs an SLO, `--trace` sends its own lengths, …) stay with the
settings (`LoadSettings.checked`) and the command, and name each option as `{field}`, so the
face that took it spells it (`sagemeter.errors.SettingsError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from sagemeter.bounds import (
    MAX_PRICE_PER_HOUR,
    MAX_RATE,
    MAX_SEED,
    MAX_SESSIONS,
    MAX_STREAMS,
    MAX_TOKENS,
    MAX_TURNS,
    MAX_WAIT_S,
    MAX_WORKERS,
)
from sagemeter.errors import UserError
from sagemeter.loadgen.lengths import parse_lengths
from sagemeter.options.base import Opt, OptionsModel, taken
from sagemeter.options.command import Command
from sagemeter.options.slo import SECONDS_TEXT, SloOptions

TRACE_SPEED_MOST = 1_000_000.0  # a trace replayed at most this many times as fast
_LABEL = "\x00"  # the label a lengths check is given, taken off its message


class LoadOptions(OptionsModel):
    """`sagemeter load`'s options by their long names, each with the default the command
    starts from (None: the load generator's, or what `Opt.unset` says)."""

    concurrency: Annotated[
        int,
        Field(ge=1, le=MAX_STREAMS, description="streams at once (closed loop)"),
        Opt("concurrency", short="-c", refuse=f"give 1 to {MAX_STREAMS} streams at once"),
    ] = 16
    max_tokens: Annotated[
        int, Field(ge=1, le=MAX_TOKENS, description="tokens asked per reply"), Opt("max_tokens")
    ] = 256
    duration: Annotated[
        float | None,
        Field(gt=0, le=MAX_WAIT_S, description="sending time, e.g. 10s or 500ms"),
        SECONDS_TEXT,
        Opt(
            "duration_s",
            unset="10s; a {trace}: all of it",
            refuse="give a positive number of seconds",
        ),
    ] = None
    workers: Annotated[
        int | None,
        Field(ge=1, le=MAX_WORKERS, description="client processes"),
        Opt("workers", unset="cores"),
    ] = None
    out: Annotated[Path | None, Field(description="write the result JSON here"), Opt()] = None
    force: Annotated[
        bool, Field(description="replace {out} and {csv} if they already exist"), Opt()
    ] = False
    csv: Annotated[
        Path | None,
        Field(
            description="write one row per request here (stream, index, send, TTFT, end, "
            "tokens, status, error)"
        ),
        Opt(),
    ] = None
    rate: Annotated[
        float | None,
        Field(gt=0, le=MAX_RATE, description="Poisson arrivals per second (open loop)"),
        Opt(
            "rate",
            refuse=f"give a positive number of requests per second, at most {MAX_RATE:,.0f}",
        ),
    ] = None
    seed: Annotated[
        int,
        Field(
            ge=-MAX_SEED - 1,
            le=MAX_SEED,
            description="seed of the schedule, the drawn lengths and a trace's text",
        ),
        Opt("seed"),
    ] = 0
    trace: Annotated[
        Path | None,
        Field(
            description="replay a Mooncake JSONL trace (timestamp ms, input_length, "
            "output_length, hash_ids) at its own times (open loop)"
        ),
        Opt("trace"),
    ] = None
    trace_speed: Annotated[
        float,
        Field(gt=0, le=TRACE_SPEED_MOST, description="{trace} time scale: 2 sends twice as fast"),
        Opt(
            "trace_speed",
            refuse=f"give a positive factor up to {TRACE_SPEED_MOST:,.0f} (2 is twice as fast)",
        ),
    ] = 1.0
    input_tokens: Annotated[
        str | None,
        Field(
            description="prompt lengths (server's tokens): fixed:N, uniform:A,B, normal:MEAN,SD, "
            "lognormal:MEAN,SD"
        ),
        Opt("input_tokens"),
    ] = None
    tokenizer: Annotated[
        Path | None,
        Field(
            description="cut {trace} and {input_tokens} prompts to exact lengths with the "
            "model's own tokenizer: a local .gguf or a folder holding tokenizer.json (never a "
            "Hub name: nothing is downloaded); the chat template's tokens still come from the "
            "server's count"
        ),
        Opt("tokenizer"),
    ] = None
    output_tokens: Annotated[
        str | None,
        Field(description="reply lengths (max_tokens, ignore_eos), same forms"),
        Opt("output_tokens", unset="{max_tokens}"),
    ] = None
    burstiness: Annotated[
        float,
        Field(
            gt=0,
            le=1000,
            description="{rate} arrivals: gamma gaps of this shape; 1 is Poisson, <1 burstier",
        ),
        Opt("burstiness", refuse="give a positive number up to 1000 (1 is Poisson)"),
    ] = 1.0
    sweep: Annotated[
        bool,
        Field(description="1, 2, 4, … up to {concurrency}; find the knee"),
        Opt("sweep", cli="--sweep"),
    ] = False
    # The SLO flags: the SLO search's options, with load's words (they are goodput's SLO too).
    slo_ttft: float | None = taken(
        SloOptions, "ttft", "goodput SLO on TTFT, e.g. 200ms", unset=None
    )
    slo_tpot: float | None = taken(SloOptions, "tpot", "goodput SLO on TPOT, e.g. 10ms", unset=None)
    search: Annotated[
        Literal["concurrency", "rate"] | None,
        Field(
            description="find the operating point: the largest `concurrency` (up to "
            "{concurrency}) or `rate` (from {rate}) that meets every SLO at {slo_percentile}"
        ),
        Opt("search", refuse="give concurrency or rate"),
    ] = None
    slo_percentile: float = taken(SloOptions, "percentile")
    price_per_hour: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_PRICE_PER_HOUR,
            allow_inf_nan=False,
            description="USD per hour of the endpoint: $/M output tokens at the operating point",
        ),
        Opt(
            "price_per_hour",
            refuse=f"give a positive number of USD up to {MAX_PRICE_PER_HOUR:,.0f}, e.g. 1.1267",
        ),
    ] = None
    sessions: Annotated[
        int | None,
        Field(
            ge=1,
            le=MAX_SESSIONS,
            description="multi-turn conversations: this many sessions at once, each sending its "
            "conversation so far every turn (closed loop per session)",
        ),
        Opt(refuse=f"give 1 to {MAX_SESSIONS}"),
    ] = None
    turns: Annotated[
        int,
        Field(ge=1, le=MAX_TURNS, description="with {sessions}: turns per session"),
        Opt(refuse=f"give 1 to {MAX_TURNS}"),
    ] = 2
    think_time: Annotated[
        str,
        Field(description="with {sessions}: wait after a reply, fixed:2s or uniform:1s,3s"),
        Opt(),
    ] = "fixed:0s"
    shard: Annotated[
        str | None, Field(description="i/n: run the i-th (from 0) of n shards"), Opt()
    ] = None
    start_at: Annotated[
        float | None,
        Field(description="common start instant, Unix seconds (for shards)"),
        Opt("start_at", refuse="give a Unix time in seconds"),
    ] = None
    api: Annotated[
        Literal["chat", "completions"],
        Field(description="chat or completions"),
        Opt("api", refuse="give chat or completions"),
    ] = "chat"
    model: Annotated[
        str | None, Field(description="model name"), Opt("model", unset="the server's first")
    ] = None
    prompt: Annotated[str | None, Field(description="the prompt sent"), Opt("prompt")] = None
    timeout: Annotated[
        float,
        Field(gt=0, le=MAX_WAIT_S, description="per-request limit"),
        SECONDS_TEXT,
        Opt("timeout_s"),
    ] = 300.0
    startup_timeout: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_WAIT_S,
            description="local:, vllm:, cmd: targets: the longest wait for the server to answer",
        ),
        SECONDS_TEXT,
        Opt(unset="the engine's own; cmd: 10m"),
    ] = None
    raw: Annotated[
        bool, Field(description="keep every request's timing"), Opt("raw", cli="--raw")
    ] = False
    uvloop: Annotated[
        bool, Field(description="use uvloop when installed"), Opt("prefer_uvloop")
    ] = True
    ray: Annotated[
        str | None,
        Field(
            description="run the workers on a Ray cluster: auto, local, ray://HOST:PORT or "
            "HOST:PORT ({workers} then counts per node)"
        ),
        Opt(),
    ] = None
    api_key: Annotated[
        str | None, Field(description="bearer token"), Opt(envvar="OPENAI_API_KEY")
    ] = None

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _lengths(cls, value: str | None) -> str | None:
        """One of the forms `fixed:N`, `uniform:A,B`, …, in bounds (the face names the option
        and the value)."""
        if value is not None:
            try:
                parse_lengths(value, _LABEL)
            except UserError as exc:
                raise ValueError(str(exc).removeprefix(f"{_LABEL} {value!r}: ")) from None
        return value


# The faces' view: the command line shows each option's own default (`[default: 16]`), and a
# refusal names the value given (`--max-tokens 0: …`), as `load` always did.
LOAD = Command("load", models=(LoadOptions,), flag_defaults=True, quote_values=True)
