"""find_operating_point: `sagemeter load --search` for an assistant, into the results folder.

The most load an endpoint takes within a latency target and what a million tokens cost there
(loadgen/operating_point.py). The result goes to `load-NAME.json` in the server's results folder
(a new name, never a path the assistant makes up); each probe is a progress notification.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from sagemeter.atomic import check_output_file
from sagemeter.errors import UserError
from sagemeter.filekinds import LOAD
from sagemeter.loadgen.result import LoadResult, OperatingPoint, Probe
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply
from sagemeter.mcp.progress import Relay, in_worker
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.options.faces import read_scaled, with_options
from sagemeter.options.load import LOAD as LOAD_OPTIONS
from sagemeter.options.slo import SLO, SloOptions
from sagemeter.results import check_result_name

SEARCHES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
# A cancelled call waits this long for the probe in flight to end (its workers stop with it).
GRACE_S = 5.0


class OperatingPointAnswer(BaseModel):
    name: str
    target: str
    path: str = Field(description="the load result file (every probe in `slo_search`)")
    found: bool
    client_limited: bool = Field(
        default=False,
        description="no point because a probe could not be measured (or made long enough): "
        "unknown, not a finding that no load meets the SLO",
    )
    reason: str
    operating_point: OperatingPoint | None
    probes: list[Probe]


def answer_text(answer: OperatingPointAnswer) -> str:
    lines = [f"{answer.name}: {answer.reason}"]
    point = answer.operating_point
    if point is not None:
        load = f"{point.concurrency} at once" if point.rate is None else f"{point.rate:g} req/s"
        usd = point.usd_per_million_tokens
        cost = f"${usd:.4g} per M output tokens" if usd is not None else "no $/M (no price)"
        lines.append(f"at {load}: {point.output_tokens_per_second:,.1f} output tokens/s, {cost}")
    lines.append(f"{len(answer.probes)} probes; wrote {answer.path}")
    return "\n".join(lines)


def register_slo_tools(server: ServerTools, config: ServerConfig) -> None:
    """Add find_operating_point to `server`."""

    @server.tool(title="Find the operating point at a latency target", annotations=SEARCHES)
    @guarded
    @with_options(SLO, "mcp")  # the search's arguments: the SLO options model (a plan's [slo])
    # its price: `sagemeter load --price-per-hour`'s declaration (the load options model)
    @with_options(LOAD_OPTIONS, "mcp", only=("price_per_hour",))
    async def find_operating_point(
        ctx: Context,
        target: Annotated[
            str,
            Field(
                description="http://HOST:PORT of an OpenAI-compatible server (a local engine's "
                "URL from start_local)"
            ),
        ],
        name: Annotated[str, Field(description="result name: load-NAME.json, new")],
        **options: Any,
    ) -> Annotated[CallToolResult, OperatingPointAnswer]:
        """The most load the endpoint takes with every latency target met at the percentile
        (doubling, then bisection; a probe that already misses stops early), its output
        tokens/s there and, with a price, its cost per million output tokens.

        Writes load-NAME.json in the results folder; each probe is a progress notification.
        """
        from sagemeter.loadgen.files import write_result
        from sagemeter.loadgen.identity import WatchedRuns
        from sagemeter.loadgen.loadrun import run_once
        from sagemeter.loadgen.operating_point import search_operating_point
        from sagemeter.loadgen.settings import LoadSettings
        from sagemeter.loadgen.tables import probe_line
        from sagemeter.measure.identity import IdentityWatch
        from sagemeter.targets import http_target

        text = target.strip()
        if not text.startswith(("http://", "https://")):
            raise UserError(
                f"target {text!r}: give http://HOST:PORT (start_local gives a local engine's URL)"
            )
        text = http_target(text).base_url  # the base, as every face records it
        check_result_name(name, label="name")
        path = config.results_dir / f"load-{name}.json"
        check_output_file(
            path, "the result file", force=False, to_replace="choose another name", kind=LOAD
        )
        given = {  # each argument in the model's unit (ms → seconds)
            option.name: read_scaled(option, options.get(option.spelled("mcp")), "mcp")
            for option in SloOptions.options()
        }
        # Checked together as a plan's [slo] is, each argument named as this tool names it.
        slo = SLO.validated(SloOptions, given, "mcp")
        assert isinstance(slo, SloOptions)
        price = options.get("price_per_hour")
        with SLO.spelling("mcp"):
            settings = LoadSettings(
                target=text, price_per_hour=price, **slo.load_fields()
            ).checked()
        percentile = settings.slo_percentile
        async with Relay(ctx) as relay:

            def work(check: Callable[[], None]) -> LoadResult:
                started = time.perf_counter()
                done = [0]

                def on_probe(probe: Probe) -> None:
                    done[0] += 1
                    relay.post_from_thread(done[0], None, probe_line(probe, percentile))
                    check()  # a cancelled call stops between probes

                # The server's identity, read first and checked after every probe.
                runs = WatchedRuns(IdentityWatch.opened(settings.target))
                found = search_operating_point(
                    settings,
                    lambda level, stop: runs.run(
                        lambda probe: run_once(probe, time.perf_counter(), None, None, stop), level
                    ),
                    lambda: time.perf_counter() - started,
                    on_probe=on_probe,
                )
                return runs.finish(found)

            result = await in_worker(work, grace_s=GRACE_S)
        config.results_dir.mkdir(parents=True, exist_ok=True)
        write_result(path, result)
        search_record = result.slo_search
        answer = OperatingPointAnswer(
            name=name,
            target=text,
            path=str(path),
            found=result.operating_point is not None,
            client_limited=search_record.client_limited if search_record else False,
            reason=search_record.reason if search_record else "",
            operating_point=result.operating_point,
            probes=search_record.probes if search_record else [],
        )
        return reply(answer_text(answer), answer)
