"""What an assistant may name: files of the server's own results folder, by name, and nothing else.

An assistant is not the user: a path it sends could point anywhere the server's user can read,
and even a "no such file" answer tells it what exists. So result files, question files and
local checkpoint files are taken only by name from the results folder (and built-in names where
a tool has them), checked by the same rule as the command line's names, before any work; any
other string gets the same refusal, whatever exists on the machine.

`inside` is the one rule every name passes: its symlinks are followed first, and anything that
then leads out of the folder, or is not a regular file (a pipe, a device, a folder where a file
is wanted), gets that same refusal, so a link in the folder is no way out of it either.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING

from sagemeter.errors import UserError
from sagemeter.mcp.config import COMMANDS_FLAG, ServerConfig
from sagemeter.questions import builtin_sets
from sagemeter.results import RESULT_NAME

if TYPE_CHECKING:
    from sagemeter.experiment import Plan


NEVER_READ = "other paths are never read, nor links out of it, pipes or devices"


class Missing(UserError):
    """A name inside the results folder that does not exist: it tells nothing about the
    machine, so it gets its own line."""


def inside(root: Path, relative: str, refusal: UserError, *, kind: str = "file") -> Path:
    """The real path of `root/relative` when it is inside `root` and a regular file (`kind`
    "file"), a folder ("folder") or either ("any"); a folder's entries, all the way down, must
    be regular files or folders inside `root` too. Anything else gets `refusal`, the same text
    whether or not what a link points at exists; a missing name inside `root` is `Missing`."""
    base = root.resolve()
    try:
        real = (root / relative).resolve()  # every symlink followed, `..` collapsed
    except (OSError, RuntimeError):  # a loop of links
        raise refusal from None
    if not real.is_relative_to(base):
        raise refusal
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        raise Missing(f"{relative!r}: no such file in the results folder ({root})") from None
    except OSError:
        raise refusal from None
    if stat.S_ISREG(mode) and kind in ("file", "any"):
        return real
    if stat.S_ISDIR(mode) and kind in ("folder", "any"):
        try:
            for entry in real.rglob("*"):
                target = entry.resolve()
                if not target.is_relative_to(base) or not (target.is_file() or target.is_dir()):
                    raise refusal
        except (OSError, RuntimeError):
            raise refusal from None
        return real
    raise refusal


def _refusal(
    config: ServerConfig, name: str, what: str, kinds: str, builtin: str = ""
) -> UserError:
    """The one refusal for `name`, whatever it points at."""
    return UserError(
        f"{what} {name[:60]!r}: give {builtin}the name of a {kinds} in this server's results "
        f"folder ({config.results_dir}); {NEVER_READ}"
    )


def _in_folder(
    config: ServerConfig, name: str, what: str, suffixes: tuple[str, ...], builtin: str = ""
) -> Path:
    """`name` (a file name, no folders) inside the results folder, or the one refusal."""
    folders = "" in suffixes
    kinds = "/".join(suffix for suffix in suffixes if suffix) + (
        " file or folder" if folders else " file"
    )
    refusal = _refusal(config, name, what, kinds, builtin)
    if not RESULT_NAME.match(name) or not name.endswith(suffixes):
        raise refusal
    try:
        return inside(config.results_dir, name, refusal, kind="any" if folders else "file")
    except Missing:
        raise UserError(f"{what} {name!r}: no such file in the results folder") from None


def result_file(config: ServerConfig, item: str) -> Path:
    """A result by its name (`measure_endpoint`'s NAME) or file name, in the results folder."""
    if RESULT_NAME.match(item) and not item.endswith(".json"):
        refusal = _refusal(config, item, "result", ".json file")
        try:
            return inside(config.results_dir, f"measure-{item}.json", refusal)
        except Missing:
            raise UserError(
                f"result {item!r}: no measure-{item}.json in the results folder"
            ) from None
    return _in_folder(config, item, "result", (".json",))


def plan_file(config: ServerConfig, name: str) -> Path:
    """An experiment plan: a .toml file in the results folder, by its name."""
    return _in_folder(config, name, "plan_file", (".toml",))


def run_folder(config: ServerConfig, runs: str, name: str) -> Path:
    """A run folder under `runs/` of the results folder, by its name, for resume."""
    refusal = UserError(
        f"resume {name[:60]!r}: give the name of a run folder under {runs}/ in this server's "
        f"results folder ({config.results_dir}); {NEVER_READ}"
    )
    if not RESULT_NAME.match(name):
        raise refusal
    try:
        return inside(config.results_dir, f"{runs}/{name}", refusal, kind="folder")
    except Missing:
        raise UserError(f"resume {name!r}: no such run folder under {runs}/") from None


def runs_folder(config: ServerConfig, runs: str) -> Path:
    """Where new runs go (`runs/` of the results folder): refused when it is a link that leads
    out of the folder, or anything but a folder, so no run is written elsewhere."""
    path = config.results_dir / runs
    if path.is_symlink() or path.exists():
        real = path.resolve()
        if not real.is_relative_to(config.results_dir.resolve()) or not real.is_dir():
            raise UserError(
                f"{runs}/ in this server's results folder ({config.results_dir}) is a link out "
                "of it or not a folder; runs are only written inside the results folder"
            )
    return path


def question_set(config: ServerConfig, spec: str | None) -> str | None:
    """A built-in question set's name, or the path of a .jsonl file in the results folder."""
    if spec is None or spec in builtin_sets():
        return spec
    try:
        return str(_in_folder(config, spec, "questions", (".jsonl",)))
    except UserError:
        raise UserError(
            f"questions {spec[:60]!r}: give a built-in set ({', '.join(builtin_sets())}) or the "
            f"name of a .jsonl file in this server's results folder ({config.results_dir}); "
            "other paths are never read"
        ) from None


def checkpoint_source(config: ServerConfig, source: str) -> str:
    """An inspect source: `hf:`, a built-in `local:`/`vllm:` checkpoint or one whose .gguf file
    is in the results folder (never the server's working folder), or a file or folder in the
    results folder by name."""
    if source.startswith("hf:"):
        return source
    if source.strip().startswith(("local:", "vllm:")):
        return target(config, source)
    return str(_in_folder(config, source, "source", (".safetensors", ".gguf", "")))


def local_checkpoint(config: ServerConfig, spec: str) -> str:
    """An embedded-engine checkpoint: a built-in name, or a .gguf file in the results folder."""
    from sagemeter.engines.checkpoints import CHECKPOINT_NAMES

    if spec in CHECKPOINT_NAMES:
        return spec
    builtin = f"{', '.join(CHECKPOINT_NAMES)} or "
    return str(_in_folder(config, spec, "checkpoint", (".gguf",), builtin))


def target(config: ServerConfig, text: str) -> str:
    """A measure target whose local checkpoint, if any, is named by the rules above."""
    text = text.strip()  # as parse_target reads it, so " local:/x" is no way around the rule
    require_commands(config, text)
    for prefix in ("local:", "vllm:"):
        if text.startswith(prefix):
            return prefix + local_checkpoint(config, text.removeprefix(prefix).strip())
    return text


def plan(config: ServerConfig, given: Plan, source: str, *, resumed: bool = False) -> Plan:
    """`given` with its question file and its arms' local checkpoints named by the rules above
    and resolved into the results folder, checked before any of them is read.

    A resumed run's journal holds the paths this function made (`RESULTS/NAME`), so with
    `resumed` a path directly in the results folder is taken by its name; nothing else is.
    """

    def named(value: str) -> str:
        path = Path(value)
        folder, results = path.parent, config.results_dir.resolve()
        if resumed and path.is_absolute() and results in (folder, folder.resolve()):
            return path.name  # checked again below, by name, like any other
        return value

    def arm_target(text: str) -> str:
        require_commands(config, text)
        for prefix in ("local:", "vllm:"):
            if text.strip().startswith(prefix):
                return prefix + named(text.strip().removeprefix(prefix).strip())
        return text

    questions = given.measure.questions
    try:
        checked = question_set(config, None if questions is None else named(questions))
    except UserError as exc:
        raise UserError(f"{source}: measure.{exc}") from None
    arms = []
    for arm in given.arms:
        if arm.target is None:
            arms.append(arm)
            continue
        try:
            arms.append(arm.model_copy(update={"target": target(config, arm_target(arm.target))}))
        except UserError as exc:
            raise UserError(f'{source}: arm "{arm.name}".target: {exc}') from None
    measure = given.measure.model_copy(update={"questions": checked})
    return given.model_copy(update={"measure": measure, "arms": arms})


def require_commands(config: ServerConfig, target: str) -> None:
    """Refuse a target whose engine runs a command line the caller wrote (`cmd:`), unless the
    user started the server allowing it: an assistant must not run programs on its own."""
    from sagemeter.engine_registry import engine_in

    engine = engine_in(target)
    if engine is not None and engine.runs_commands and not config.allow_commands:
        raise UserError(
            f"{engine.name}: targets run a command on this machine, and this server was started "
            f"without {COMMANDS_FLAG}: ask the user to restart it as `sagemeter mcp "
            f"{COMMANDS_FLAG}` to allow it"
        )
