"""What any vLLM server says about itself beyond the OpenAI API: its chat template.

vLLM has no `/props`; its `/tokenizer_info` (served when vLLM was started with
`--enable-tokenizer-info-endpoint`, as `vllm:` targets are) holds the chat template it applies.
Without that endpoint the checksum stays None and the reason says how to get it.
"""

from __future__ import annotations

import hashlib

from sagemeter.transport.client import HttpClient, TransportError

ENABLE_HINT = "start vLLM with --enable-tokenizer-info-endpoint to record it"


async def vllm_chat_template_sha256(root: str) -> tuple[str | None, str | None]:
    """(SHA-256 of the chat template, None) or (None, why not), from `root`'s /tokenizer_info."""
    http = HttpClient(root, timeout_s=10.0)
    try:
        response = await http.call_json("GET", "/tokenizer_info", timeout_s=10.0)
    except TransportError as exc:
        return None, f"chat template not read: GET /tokenizer_info failed ({exc})"
    finally:
        await http.aclose()
    if response.status == 404:
        return None, f"chat template not read: the server has no /tokenizer_info; {ENABLE_HINT}"
    if response.status != 200:
        return None, f"chat template not read: /tokenizer_info answered HTTP {response.status}"
    payload = response.payload
    template = payload.get("chat_template") if isinstance(payload, dict) else None
    if not isinstance(template, str) or not template:
        return None, "chat template not read: /tokenizer_info names none"
    return hashlib.sha256(template.encode()).hexdigest(), None
