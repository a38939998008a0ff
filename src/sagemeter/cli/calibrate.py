"""`sagemeter calibrate-server`: the known-truth server in the foreground, for any load tool.

Point guidellm, vllm bench, or `sagemeter load` at it: its timing is set here, so whatever a tool
reports can be checked against what a perfect client would see.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from sagemeter.bounds import MAX_CONTEXT_TOKENS
from sagemeter.errors import UserError
from sagemeter.printable import SafeConsole


def calibrate_server_command(
    ttft: Annotated[
        str, typer.Option(help="time to first token: 50ms, 0.05s or 0.05 (seconds)")
    ] = "50ms",
    itl: Annotated[str, typer.Option(help="time between tokens: 4ms, 0.004s or 0.004")] = "4ms",
    prefill: Annotated[
        str,
        typer.Option(
            help="time per prompt token not served by the prefix cache, e.g. 40us [0: free]"
        ),
    ] = "0s",
    prefix_cache: Annotated[
        bool,
        typer.Option(
            help="cache prompts in blocks of 16 tokens, as vLLM does: a prompt's leading full "
            "blocks that an earlier prompt had cost no prefill"
        ),
    ] = False,
    max_model_len: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_CONTEXT_TOKENS,
            help="context length in tokens: said in /v1/models, longer requests refused",
        ),
    ] = None,
    slots: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="serve at most K generations at once; the rest queue in arrival order and "
            "their TTFT grows by the wait (a known operating point) [no limit]",
            show_default=False,
        ),
    ] = None,
    arrival_log: Annotated[
        Path | None,
        typer.Option(
            help="write a JSON line per generation request: its true arrival (Unix s), when "
            "its service began, how long it queued"
        ),
    ] = None,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="port on 127.0.0.1 (0 picks a free one)")
    ] = 0,
    port_file: Annotated[
        Path | None, typer.Option(help="write the port to this file once listening")
    ] = None,
    empty_every: Annotated[
        int, typer.Option(help="fault: tokens 1, 1+N, … of every stream carry empty text")
    ] = 0,
    reasoning_tokens: Annotated[
        int, typer.Option(help="fault: the first N tokens of a chat stream as delta.reasoning")
    ] = 0,
    fail_every: Annotated[
        int, typer.Option(help="fault: every Nth generation request answers an HTTP error")
    ] = 0,
    fail_status: Annotated[int, typer.Option(help="fault: the error's status")] = 500,
    retry_after: Annotated[
        str | None, typer.Option(help="fault: a Retry-After header on the error, e.g. 1s")
    ] = None,
    stall_every: Annotated[
        int,
        typer.Option(
            help="fault: every Nth stream pauses (--stall long, after --stall-after tokens)"
        ),
    ] = 0,
    stall: Annotated[str, typer.Option(help="fault: how long a stalled stream pauses")] = "0s",
    stall_after: Annotated[
        int, typer.Option(help="fault: tokens before the pause (0: before the first token)")
    ] = 1,
    stall_once: Annotated[
        int, typer.Option(help="fault: only the Nth generation request pauses (--stall long), once")
    ] = 0,
    drop_every: Annotated[
        int, typer.Option(help="fault: every Nth stream is cut after --drop-after tokens")
    ] = 0,
    drop_after: Annotated[int, typer.Option(help="fault: tokens before the cut")] = 1,
    silent: Annotated[bool, typer.Option(help="fault: read requests, never answer")] = False,
    die_after: Annotated[
        int, typer.Option(help="fault: answer N generation requests, then exit (a crash)")
    ] = 0,
    require_key: Annotated[
        str, typer.Option(help="fault: answer 401 to generations without this bearer key")
    ] = "",
    echo_key_split: Annotated[
        int,
        typer.Option(
            help="fault: the first N tokens (N ≥ 2) of every stream echo the request's bearer "
            "key, split into N pieces"
        ),
    ] = 0,
    usage_offset: Annotated[
        int, typer.Option(help="fault: usage reports N more tokens than were sent (N < 0: fewer)")
    ] = 0,
    no_prompt_tokens: Annotated[
        bool, typer.Option(help="fault: usage leaves out prompt_tokens (no prompt count)")
    ] = False,
    answer: Annotated[
        str, typer.Option(help="fault: answer every generation as `html` or `no-choices`")
    ] = "",
    connection_close: Annotated[
        str,
        typer.Option(
            help="fault: end kept-alive connections: `always` (Connection: close), "
            "`after-reply` (closed silently after each reply) or `on-reuse` (a reused "
            "connection is closed before any answer)"
        ),
    ] = "",
    swap_model_after: Annotated[
        int,
        typer.Option(
            help="fault: after N generation requests the server is another model "
            "(/v1/models and every reply's `model` say truth-swapped)"
        ),
    ] = 0,
    restart_after: Annotated[
        int,
        typer.Option(
            help="fault: after N generation requests the server restarts as the same model "
            "(its /metrics, served under this fault, shows a new start time and its counter "
            "begun again)"
        ),
    ] = 0,
    wrong_share: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="answer the quality questions of every built-in set (and --questions files) "
            "with this share wrong, chosen by a hash of each question's id (the same questions "
            "on every server), the rest right [off: every reply is tok tok …]",
        ),
    ] = None,
    wrong_share_extra: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="a second share wrong, independent of the first and drawn by --wrong-seed: "
            "A with --wrong-share 0.1 against B adding --wrong-share-extra 0.05 is a true drop "
            "of 0.05 × 0.9",
        ),
    ] = 0.0,
    wrong_seed: Annotated[
        int, typer.Option(help="which questions the extra share misses (seeds differ: a tie)")
    ] = 0,
    questions: Annotated[
        list[str] | None,
        typer.Option(help="a JSONL question set the server also answers (repeatable)"),
    ] = None,
) -> None:
    """Serve an OpenAI-compatible API on 127.0.0.1 with known timing, until Ctrl-C.

    The fault options make it misbehave the way real servers do (see docs/load.md), so what a
    client does with empty tokens, reasoning, errors, stalls and cut streams can be checked.
    """
    from sagemeter.atomic import check_distinct_outputs, check_output_file, write_text_atomic
    from sagemeter.calibrate.answers import KnownAnswers, WrongShares
    from sagemeter.calibrate.faults import Faults
    from sagemeter.calibrate.loops import run_precisely
    from sagemeter.calibrate.server import serve
    from sagemeter.calibrate.timing import TruthTiming, parse_duration
    from sagemeter.transport.request import check_api_key

    check_api_key(require_key, "--require-key")  # no request can carry a key with CR/LF
    # Scratch files, rewritten each start; never a device, a link, a question file or a result.
    given = [Path(item) for item in questions or () if Path(item).suffix]
    check_distinct_outputs([("--port-file", port_file), ("--arrival-log", arrival_log)])
    if port_file is not None:
        check_output_file(port_file, "--port-file", force=True, inputs=given)
    if arrival_log is not None:
        check_output_file(arrival_log, "--arrival-log", force=True, inputs=given)
    timing = TruthTiming(
        parse_duration(ttft, "--ttft"),
        parse_duration(itl, "--itl"),
        parse_duration(prefill, "--prefill"),
        prefix_cache,
    )
    try:
        faults = Faults(
            empty_every=empty_every,
            reasoning_tokens=reasoning_tokens,
            fail_every=fail_every,
            fail_status=fail_status,
            retry_after_s=(
                parse_duration(retry_after, "--retry-after") if retry_after is not None else None
            ),
            stall_every=stall_every,
            stall_s=parse_duration(stall, "--stall"),
            stall_after=stall_after,
            stall_once=stall_once,
            drop_every=drop_every,
            drop_after=drop_after,
            silent=silent,
            die_after=die_after,
            usage_offset=usage_offset,
            no_prompt_tokens=no_prompt_tokens,
            require_key=require_key,
            echo_key_split=echo_key_split,
            answer=answer,  # type: ignore[arg-type]  # checked by Faults
            connection_close=connection_close,  # type: ignore[arg-type]  # checked by Faults
            swap_model_after=swap_model_after,
            restart_after=restart_after,
        )
    except ValueError as exc:
        raise UserError(f"calibrate-server: {exc}") from None
    if (wrong_share_extra or questions) and wrong_share is None:
        raise UserError("calibrate-server: --wrong-share-extra and --questions need --wrong-share")
    answers = None
    if wrong_share is not None:
        shares = WrongShares(wrong_share, wrong_share_extra, wrong_seed)
        answers = KnownAnswers.of(shares, tuple(questions or ()))
    console = SafeConsole(highlight=False)

    def ready(bound: int) -> None:
        if port_file is not None:
            write_text_atomic(port_file, f"{bound}\n")
        console.print(f"known-truth server at http://127.0.0.1:{bound} (OpenAI-compatible, /v1)")
        console.print(
            f"ttft {timing.ttft_s * 1000:g} ms, itl {timing.itl_s * 1000:g} ms: a 256-token reply "
            f"takes {timing.request_seconds(256):.3f} s, 16 at once make "
            f"{timing.tokens_per_second(16, 256):,.0f} tokens/s; GET /stats for its own CPU; "
            "Ctrl-C stops it"
        )
        if slots is not None:
            console.print(
                f"{slots} slot{'s' if slots != 1 else ''}: at most {slots} generations at once, "
                "the rest queue (their TTFT counts the wait)"
            )
        if timing.prefill_s or timing.prefix_cache:
            rate = timing.prefill_tokens_per_second
            console.print(
                f"prefill {timing.prefill_s * 1e6:g} µs per prompt token"
                + (f" ({rate:,.0f} tokens/s)" if rate else "")
                + (
                    "; prefix cache on (blocks of 16 tokens)"
                    if timing.prefix_cache
                    else "; no prefix cache"
                )
                + "; the server counts a prompt as 3 template tokens plus its words"
            )
        if answers is not None:
            console.print(
                f"answers {len(answers.by_prompt):,} known questions, "
                f"{answers.shares.total:.1%} of them wrong (common share "
                f"{answers.shares.common:g}, extra {answers.shares.extra:g}, seed "
                f"{answers.shares.seed})"
            )

    try:
        with contextlib.suppress(KeyboardInterrupt):
            run_precisely(
                serve(
                    timing,
                    port,
                    ready,
                    faults=faults,
                    max_model_len=max_model_len,
                    slots=slots,
                    arrival_log=arrival_log,
                    answers=answers,
                )
            )
    except OSError as exc:
        raise UserError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    console.print("stopped")


def register(app: typer.Typer) -> None:
    """Add the `calibrate-server` command to the main app."""
    app.command("calibrate-server", help=(calibrate_server_command.__doc__ or "").strip())(
        calibrate_server_command
    )
