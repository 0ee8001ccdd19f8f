"""Removing the reasoning that some models print before their answer.

Chat backends return a reply's `content` as the model wrote it; callers that want only the
translation pass it through `strip_reasoning`. Shapes handled, each only at the start of the
text so that a translation which mentions these words is left alone:
- a block `<think>…</think>` (also `<thinking>`, `<reasoning>`, `<|START_THINKING|>`);
- the same block cut short by the token limit (no closing marker): the whole text is reasoning;
- reasoning followed by a bare `</think>`, from chat templates that put `<think>` in the prompt;
- gpt-oss "harmony" channels: only the `final` channel is the answer;
- Command-style `<|START_RESPONSE|>…<|END_RESPONSE|>` around the answer.
"""

from __future__ import annotations

import re

# Opening and closing markers of a reasoning block; matched case-insensitively.
_BLOCKS = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
)
_BLOCK_START = re.compile("|".join(re.escape(opening) for opening, _ in _BLOCKS), re.IGNORECASE)
_CLOSINGS = {opening.lower(): closing for opening, closing in _BLOCKS}

_HARMONY_CHANNEL = "<|channel|>"
_HARMONY_FINAL = re.compile(r"<\|channel\|>\s*final\b.*?<\|message\|>", re.DOTALL)
_HARMONY_END = re.compile(r"<\|(?:return|end|call)\|>")
_HARMONY_START = re.compile(r"\s*(?:<\|start\|>\s*assistant\s*)?<\|channel\|>")

_RESPONSE_OPENING = "<|START_RESPONSE|>"
_RESPONSE_CLOSING = "<|END_RESPONSE|>"


def strip_reasoning(text: str) -> str:
    """`text` without the reasoning a model printed before its answer; unchanged if none."""
    if "<" not in text:  # every marker has one; most translations have none (a job's every line)
        return text
    if _HARMONY_CHANNEL in text:
        return _harmony_final(text)
    stripped = _unwrap_response(_strip_orphan_think_end(_strip_blocks(text)))
    return text if stripped == text else stripped.lstrip()


def _strip_blocks(text: str) -> str:
    """Remove leading reasoning blocks; a block that never closes takes the rest of the text."""
    while True:
        body = text.lstrip()
        match = _BLOCK_START.match(body)
        if match is None:
            return text
        closing = _CLOSINGS[match.group().lower()]
        end = body.lower().find(closing.lower(), match.end())
        if end == -1:
            return ""
        text = body[end + len(closing) :]


def _strip_orphan_think_end(text: str) -> str:
    # Only `</think>`: chat templates that open the block in the prompt exist for it alone,
    # and the other closing markers are too unlikely in model output to justify the risk.
    lowered = text.lower()
    end = lowered.find("</think>")
    if end == -1 or "<think>" in lowered[:end]:
        return text
    return text[end + len("</think>") :]


def _unwrap_response(text: str) -> str:
    if not text.lstrip().startswith(_RESPONSE_OPENING):
        return text
    answer = text.lstrip()[len(_RESPONSE_OPENING) :]
    end = answer.find(_RESPONSE_CLOSING)
    return answer if end == -1 else answer[:end]


def _harmony_final(text: str) -> str:
    finals = list(_HARMONY_FINAL.finditer(text))
    if not finals:
        # Channels but no final one: the output stopped while the model was still reasoning.
        return "" if _HARMONY_START.match(text) else text
    answer = text[finals[-1].end() :]
    end = _HARMONY_END.search(answer)
    return (answer if end is None else answer[: end.start()]).lstrip()
