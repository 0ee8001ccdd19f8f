"""A custom translator for the tests, plugged in as "recording:RecordingTranslator".

It "translates" by upper-casing the source text (plus an optional suffix), appends one line
per translated direction to a record file, so tests can count what was computed, and can be
told to fail on a target language or to return the wrong number of outputs.
"""

from __future__ import annotations

from pathlib import Path

SEPARATOR = "\x1f"


def tagged_prompt(src_lang: str, tgt_lang: str, src_text: str) -> str:
    """A prompt function that keeps the direction visible to the translator."""
    return SEPARATOR.join((src_lang, tgt_lang, src_text))


def make_tagged_prompt(prefix: str):
    """A prompt-function factory (used with prompt_kwargs)."""

    def prompt(src_lang: str, tgt_lang: str, src_text: str) -> str:
        return SEPARATOR.join((src_lang, tgt_lang, prefix + src_text))

    return prompt


class RecordingTranslator:
    def __init__(
        self,
        record: str,
        suffix: str = "",
        fail_on_target: str | None = None,
        fail_while_exists: str | None = None,
        drop_one: bool = False,
        api_key: str | None = None,
    ) -> None:
        self.record = Path(record)
        self.suffix = suffix
        self.fail_on_target = fail_on_target
        self.fail_while_exists = fail_while_exists
        self.drop_one = drop_one
        with self.record.open("a", encoding="utf-8") as handle:
            handle.write("LOAD\n")

    def translate(self, prompts: list[str]) -> list[str]:
        src_lang, tgt_lang, _ = prompts[0].split(SEPARATOR, 2)
        failing = self.fail_on_target == tgt_lang and (
            self.fail_while_exists is None or Path(self.fail_while_exists).exists()
        )
        if failing:
            raise RuntimeError(f"simulated failure on {src_lang}-{tgt_lang}")
        with self.record.open("a", encoding="utf-8") as handle:
            handle.write(f"{src_lang}-{tgt_lang}\n")
        outputs = [prompt.split(SEPARATOR, 2)[2].upper() + self.suffix for prompt in prompts]
        return outputs[:-1] if self.drop_one else outputs
