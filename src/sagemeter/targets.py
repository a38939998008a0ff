"""One string names an endpoint; this module turns it into a typed Target.

Accepted forms:
  http://HOST:PORT[/v1]   any OpenAI-compatible server (vLLM, llama.cpp, SGLang, Ollama)
  local:CHECKPOINT        the embedded llama.cpp engine (a checkpoint name or a .gguf path)
  vllm:CHECKPOINT         a real `vllm serve` started by sagemeter (a checkpoint name, a .gguf
                          path exported to a Hugging Face folder, or a Hugging Face folder)
  cmd:COMMAND             any OpenAI-compatible server, started from this command line
                          (`{port}` marks where the port goes)
  ENGINE:SPEC             a server an engine plug-in starts (`sagemeter.engines.registry`)
  NAME@REGION             an Amazon SageMaker real-time endpoint
  NAME                    a SageMaker endpoint: in the region this machine placed it, else in the
                          configured region (AWS_REGION, AWS_DEFAULT_REGION, the profile's)
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from sagemeter.engine_registry import ENGINE_PREFIX as ENGINE_PREFIX  # the faces read it here
from sagemeter.engine_registry import engine_named
from sagemeter.errors import UserError
from sagemeter.platforms.registry import bare_target
from sagemeter.transport.address import parse_address

ACCEPTED_FORMS = (
    "http://HOST:PORT (OpenAI-compatible server), local:CHECKPOINT (embedded engine), "
    "vllm:CHECKPOINT (vLLM started by sagemeter), cmd:COMMAND (a server started from a command "
    "line with {port}), NAME@REGION (SageMaker)"
)
PORT_MARK = "{port}"
MASK = "***"
# Flags and variables whose value is a secret: a word of their name is one of these
# (--api-key, --hf-token, HF_TOKEN=, --password; not --tokenizer or --max-num-batched-tokens).
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd"})


def _secret_name(name: str) -> bool:
    return any(part in SECRET_WORDS for part in re.split(r"[-_]+", name.lower()) if part)


def _secret_flag(word: str) -> bool:
    return word.startswith("-") and _secret_name(word.lstrip("-"))


def masked_words(words: list[str]) -> list[str]:
    """A command line with the values of secret-looking flags masked (`--f V` and `--f=V`)."""
    shown: list[str] = []
    hide_next = False
    for word in words:
        flag, equals, _ = word.partition("=")
        if hide_next:
            shown.append(MASK)
            hide_next = False
        elif equals and (_secret_flag(flag) or _secret_name(flag)):
            shown.append(f"{flag}={MASK}")
        else:
            shown.append(word)
            hide_next = _secret_flag(word)
    return shown


# SageMaker endpoint names (botocore's EndpointName pattern): 1-63 alphanumerics and hyphens,
# not starting or ending with a hyphen. Shared with the SageMaker deploy spec.
SAGEMAKER_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
AWS_REGION_NAME = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")


@dataclass(frozen=True)
class OpenAITarget:
    """A running OpenAI-compatible server; `base_url` always ends in /v1."""

    base_url: str

    @property
    def default_name(self) -> str:
        """`HOST-PORT`, a result's file name: an IPv6 host's colons become dashes
        (`ipv6-1-8000` for [::1]:8000), since a name holds no colon."""
        parts = urlsplit(self.base_url)
        host = str(parts.hostname)
        if ":" in host:
            host = "ipv6-" + (re.sub(r"[^A-Za-z0-9.]+", "-", host).strip("-.") or "any")
        return f"{host}-{parts.port}" if parts.port else host

    def __str__(self) -> str:
        return self.base_url


class EngineTarget:
    """A server an engine starts and stops on this machine, written `ENGINE:SPEC`; `engine` names
    its plug-in in `sagemeter.engines.registry` (built in: local, vllm, cmd)."""

    engine: ClassVar[str]

    @property
    def default_name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class LocalTarget(EngineTarget):
    """A checkpoint for the embedded engine, started and stopped by sagemeter."""

    checkpoint: str
    engine: ClassVar[str] = "local"

    @property
    def default_name(self) -> str:
        name = self.checkpoint.rsplit("/", 1)[-1]
        return name.removesuffix(".gguf")

    def __str__(self) -> str:
        return f"local:{self.checkpoint}"


@dataclass(frozen=True)
class VllmTarget(EngineTarget):
    """A checkpoint served by a real `vllm serve` that sagemeter starts and stops."""

    checkpoint: str
    engine: ClassVar[str] = "vllm"

    @property
    def default_name(self) -> str:
        name = self.checkpoint.rstrip("/").rsplit("/", 1)[-1]
        return "vllm-" + name.removesuffix(".gguf")

    def __str__(self) -> str:
        return f"vllm:{self.checkpoint}"


@dataclass(frozen=True)
class CommandTarget(EngineTarget):
    """Any OpenAI-compatible server, started from `command` (split as a shell would, run without
    one) with `{port}` replaced by a free port; sagemeter stops it after the run. `cwd` is the
    folder it runs in (a run's plan folder, so the command's relative paths mean what the plan
    means; None: the current folder)."""

    command: str
    cwd: str | None = None
    engine: ClassVar[str] = "cmd"

    def words(self) -> list[str]:
        """The command line, split as a shell would (checked when parsed)."""
        return shlex.split(self.command)

    @property
    def default_name(self) -> str:
        """`cmd-` and the program's name (with its module or subcommand): `cmd-vllm-serve`."""
        words = [word for word in self.words() if PORT_MARK not in word]
        program = words[0].rsplit("/", 1)[-1]
        rest = words[1:]
        if program.startswith("python") and "-m" in rest[:-1]:
            program = rest[rest.index("-m") + 1]
        elif rest and not rest[0].startswith("-"):
            program = f"{program}-{rest[0].rsplit('/', 1)[-1]}"
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", program).strip("-.") or "server"
        return f"cmd-{slug}"[:100]

    def __str__(self) -> str:
        """As results and messages show it: the values of secret flags masked."""
        words = self.words()
        masked = masked_words(words)
        return f"cmd:{self.command}" if masked == words else f"cmd:{shlex.join(masked)}"


@dataclass(frozen=True)
class SageMakerTarget:
    """An Amazon SageMaker real-time endpoint in one region; `region_source` says which rule chose
    the region (given, recorded, AWS_REGION, AWS_DEFAULT_REGION, profile NAME), kept in results
    but not part of the endpoint's identity."""

    # The platform whose endpoints these are (its registry name): what it says of one that runs
    # already (platforms/registry.py `endpoint_facts`) is asked of it there.
    platform: ClassVar[str] = "sagemaker"
    name: str
    region: str
    region_source: str = field(default="given", compare=False)

    @property
    def default_name(self) -> str:
        return self.name

    def __str__(self) -> str:
        return f"{self.name}@{self.region}"


Target = OpenAITarget | EngineTarget | SageMakerTarget


def run_in(target: Target, folder: str) -> Target:
    """`target` started in `folder` when it is a command sagemeter runs (`cmd:`: its relative
    paths then mean what a plan's do); any other target as it is."""
    return replace(target, cwd=folder) if isinstance(target, CommandTarget) else target


def parse_command(spec: str, text: str) -> CommandTarget:
    """`cmd:COMMAND`: a command line with `{port}`, split as a shell would (quotes and all).

    A command line holding a secret (`--api-key X`, `HF_TOKEN=X`) is refused: the command is
    kept in the run's journal and shown in results, so the server takes its secrets from its
    environment instead. Messages never repeat a value that looks secret."""
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise UserError(f"target cmd:…: {exc}; quote the command as a shell would") from None
    if not words:
        raise UserError(f'target {text!r} names no command; write cmd:"PROGRAM ... {{port}}"')
    held = secrets_in(words)
    if held:
        raise UserError(
            f"target cmd:{words[0]} …: {', '.join(held)} puts a secret on the command line, which "
            "sagemeter keeps in the run's journal and shows in results; give the server its key "
            "in its environment instead (e.g. export VLLM_API_KEY or HF_TOKEN before sagemeter "
            "runs) and sagemeter's requests theirs with --api-key or OPENAI_API_KEY"
        )
    if not any(PORT_MARK in word for word in words):
        raise UserError(
            f"target {text!r}: the command must say where its port goes with {PORT_MARK} "
            f"(e.g. --port {PORT_MARK}); sagemeter picks a free port on 127.0.0.1"
        )
    return CommandTarget(spec.strip())


def secrets_in(words: list[str]) -> list[str]:
    """The flags (`--api-key`) and variables (`HF_TOKEN=`) that carry a secret value in `words`,
    by name only."""
    held: list[str] = []
    for index, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if _secret_flag(flag) and (value or (not equals and index + 1 < len(words))):
            held.append(flag)
        elif equals and value and not flag.startswith("-") and _secret_name(flag):
            held.append(flag + "=")
    return held


def parse_target(text: str) -> Target:
    """Parse one target string, or raise UserError naming the accepted forms."""
    raw = text.strip()
    if raw.lower().startswith(("http://", "https://")):
        return http_target(raw)
    if raw.startswith("local:"):
        checkpoint = raw.removeprefix("local:").strip()
        if not checkpoint:
            raise UserError(
                f"target {text!r} names no checkpoint; accepted forms: {ACCEPTED_FORMS}"
            )
        return LocalTarget(checkpoint)
    if raw.startswith("vllm:"):
        checkpoint = raw.removeprefix("vllm:").strip()
        if not checkpoint:
            raise UserError(
                f"target {text!r} names no checkpoint; accepted forms: {ACCEPTED_FORMS}"
            )
        return VllmTarget(checkpoint)
    if raw.startswith("cmd:"):
        return parse_command(raw.removeprefix("cmd:"), text)
    plugged = ENGINE_PREFIX.match(raw)
    if plugged is not None:
        return _plugin_target(plugged.group(1), plugged.group(2).strip(), text)
    if "@" in raw:
        name, _, region = raw.partition("@")
        if not SAGEMAKER_ENDPOINT_NAME.match(name):
            raise UserError(
                f"target {text!r}: {name!r} is not a valid SageMaker endpoint name "
                "(1-63 letters, digits and hyphens)"
            )
        if not AWS_REGION_NAME.match(region):
            raise UserError(f"target {text!r}: {region!r} is not an AWS region such as us-east-2")
        return SageMakerTarget(name, region)
    if SAGEMAKER_ENDPOINT_NAME.match(raw):
        return _bare_endpoint(raw, text)
    raise UserError(f"target {text!r} is not understood; accepted forms: {ACCEPTED_FORMS}")


def _plugin_target(engine: str, spec: str, text: str) -> EngineTarget:
    """`ENGINE:SPEC` for an engine plug-in installed beside sagemeter (its own parser)."""
    plugin = engine_named(engine)
    if plugin is None:
        raise UserError(
            f"target {text!r}: no engine is called {engine!r}; accepted forms: {ACCEPTED_FORMS}"
        )
    return plugin.parse(spec, text)


def _bare_endpoint(name: str, text: str) -> Target:
    """A bare NAME: an endpoint of the platform that places bare names (SageMaker's, in the
    region this machine placed it, else the configured one), found through the platform
    registry: the platforms sit above targets, and SageMaker (and boto3) load only for a bare
    endpoint name."""
    found = bare_target(name, text)
    if found is None:
        raise UserError(
            f"target {text!r}: no installed platform names endpoints by a bare name; "
            f"accepted forms: {ACCEPTED_FORMS}"
        )
    return found


def http_target(raw: str) -> OpenAITarget:
    """An http(s) URL, read by the one server-URL parser (`transport.address`), kept as its
    base with /v1."""
    address = parse_address(raw)
    netloc = address.host_header
    if urlsplit(raw.strip()).port is not None and ":" not in netloc.rpartition("]")[2]:
        netloc = f"{netloc}:{address.port}"  # a port written out stays (http://h:80 as given)
    scheme = "https" if address.tls else "http"
    return OpenAITarget(f"{scheme}://{netloc}{address.base_path}/v1")


def input_paths(text: str) -> list[Path]:
    """The files a target string reads (a `local:` or `vllm:` checkpoint given as a path), so
    an output is never one of them; nothing for a URL, a command or an endpoint."""
    raw = text.strip()
    for prefix in ("local:", "vllm:"):
        if raw.startswith(prefix) and raw.removeprefix(prefix).strip():
            return [Path(raw.removeprefix(prefix).strip())]
    return []
