"""What an OpenAI-compatible chat completion returns, read alike online and in batches."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REPLY_EXCERPT = 200
"""How much of a reply that cannot be read an error message quotes, in bytes."""


@dataclass
class Usage:
    """Counts over every `translate` call of one translator."""

    requests: int = 0  # HTTP requests sent, retries included
    retries: int = 0
    cache_hits: int = 0  # prompts answered from the cache, without a request
    prompt_tokens: int = 0  # as the server reports them, for answers received (not cache hits)
    completion_tokens: int = 0  # reasoning tokens included, as the API counts them
    reasoning_tokens: int = 0  # `completion_tokens_details.reasoning_tokens`, where reported
    truncated: int = 0  # answers cut at the token limit (finish_reason "length")
    polls: int = 0  # looks at a pending batch (mode batch): progress while batches run


@dataclass(frozen=True)
class Answer:
    content: str
    usage: Mapping[str, Any]
    truncated: bool
    attempts: int = 1
    """The requests it took, retries included."""


@dataclass(frozen=True)
class Failure:
    reason: str
    retryable: bool = True
    retry_after: float | None = None


def read_reply(payload: bytes) -> Answer | Failure:
    """The answer in a 2xx's body, or what is wrong with the body."""
    try:
        data = json.loads(payload)
    except ValueError:  # also a UnicodeDecodeError
        return Failure(f"the reply is not JSON: {excerpt(payload)!r}")
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        return Failure(f"the reply has no choices: {excerpt(payload)!r}")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    if not isinstance(content, str):
        reasoning = any(message.get(name) for name in ("reasoning", "reasoning_content"))
        hint = " (it has reasoning only: is max_tokens too small?)" if reasoning else ""
        return Failure(f"the reply's content is null{hint}")
    usage = data.get("usage")
    return Answer(
        content, usage if isinstance(usage, dict) else {}, choice.get("finish_reason") == "length"
    )


def excerpt(payload: bytes) -> str:
    return payload[:REPLY_EXCERPT].decode(errors="replace")
