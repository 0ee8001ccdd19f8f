"""Test plugins that fail on demand, for the tests of failures and reruns.

A fault is switched on by creating the file that $FAULT_FLAG names, and off by deleting it.
"""

from __future__ import annotations

import os
from pathlib import Path


def fault_on() -> bool:
    flag = os.environ.get("FAULT_FLAG")
    return flag is not None and flag != "" and Path(flag).exists()


class FlakyMetric:
    """Each translation's length; fails while the fault is on."""

    name = "flaky"
    columns = ("length",)

    def signature(self) -> str:
        return "length|v1"

    def score(self, rows):
        if fault_on():
            raise RuntimeError("simulated scoring failure")
        return {"length": [float(len(text)) for text in rows["mt_text"]]}


class NamelessMetric:
    """A metric of one's own that forgot its `name`."""

    columns = ("length",)

    def signature(self) -> str:
        return "length|v1"

    def score(self, rows):
        return {"length": [float(len(text)) for text in rows["mt_text"]]}


class EchoTranslator:
    """Returns each prompt's last line; takes any keyword arguments."""

    def __init__(self, **settings) -> None:
        self.settings = settings

    def translate(self, prompts: list[str]) -> list[str]:
        return [prompt.splitlines()[-1] for prompt in prompts]


class LeakyTranslator:
    """Fails as a client that puts its key in its errors does; the key comes from the variable
    that `token_env` names."""

    def __init__(self, token_env: str, **settings) -> None:
        self.key = os.environ[token_env]

    def translate(self, prompts: list[str]) -> list[str]:
        cause = ConnectionError(f"refused: Authorization: Bearer {self.key}")
        raise RuntimeError(f"401 Unauthorized for key {self.key}") from cause
