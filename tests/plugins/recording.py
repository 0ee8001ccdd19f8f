"""A custom translator for the tests, plugged in as "recording:RecordingTranslator".

It "translates" by upper-casing the source text (plus an optional suffix), appends one line
per translated direction to a record file, so tests can count what was computed, and can be
told to fail on a target language, to hang on one, or to return the wrong number of outputs,
None, or text that UTF-8 cannot encode.
"""

from __future__ import annotations

import os
import time
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
        load_seconds: float = 0.0,
        record_devices: bool = False,
        direction_seconds: float = 0.0,
        hang_on_target: str | None = None,
        hang_while_exists: str | None = None,
        return_none: bool = False,
        lone_surrogate: bool = False,
    ) -> None:
        self.record = Path(record)
        self.suffix = suffix
        self.fail_on_target = fail_on_target
        self.fail_while_exists = fail_while_exists
        self.drop_one = drop_one
        self.record_devices = record_devices
        self.direction_seconds = direction_seconds
        self.hang_on_target = hang_on_target
        self.hang_while_exists = hang_while_exists
        self.return_none = return_none
        self.lone_surrogate = lone_surrogate
        time.sleep(load_seconds)  # a simulated model load
        with self.record.open("a", encoding="utf-8") as handle:
            handle.write("LOAD\n")

    def translate(self, prompts: list[str]) -> list[str]:
        src_lang, tgt_lang, _ = prompts[0].split(SEPARATOR, 2)
        failing = self.fail_on_target == tgt_lang and (
            self.fail_while_exists is None or Path(self.fail_while_exists).exists()
        )
        if failing:
            raise RuntimeError(f"simulated failure on {src_lang}-{tgt_lang}")
        if self.hang_on_target == tgt_lang:
            # As a translator waiting for an answer that never comes (or, with a file named,
            # until the file is removed).
            deadline = time.monotonic() + 3600
            while time.monotonic() < deadline and (
                self.hang_while_exists is None or Path(self.hang_while_exists).exists()
            ):
                time.sleep(0.05)
        time.sleep(self.direction_seconds)
        with self.record.open("a", encoding="utf-8") as handle:
            handle.write(f"{src_lang}-{tgt_lang}\n")
        if self.record_devices:
            devices = os.environ.get("CUDA_VISIBLE_DEVICES", "none")
            with open(f"{self.record}.devices", "a", encoding="utf-8") as handle:
                handle.write(
                    f"{src_lang}-{tgt_lang} {devices} {time.time()} {os.getpid()} "
                    f"{os.environ.get('SLURM_JOB_ID', 'local')}\n"
                )
        outputs = [prompt.split(SEPARATOR, 2)[2].upper() + self.suffix for prompt in prompts]
        if self.return_none:
            return None  # type: ignore[return-value]
        if self.lone_surrogate:
            # What decoding bytes with errors="surrogateescape" leaves in a string.
            outputs[-1] += b"\xff".decode("utf-8", errors="surrogateescape")
        return outputs[:-1] if self.drop_one else outputs


class LoadCountingMetric:
    """A metric for the tests that records each model load, as a neural metric would load one.

    The record file comes from $RECORDING_METRIC_FILE; the simulated load sleeps
    $RECORDING_METRIC_LOAD_SECONDS (default 0).
    """

    name = "load-counting"
    columns = ("length_ratio",)

    def __init__(self) -> None:
        self.loaded = False

    def signature(self) -> str:
        return "length-ratio|v1"

    def score(self, rows):
        if not self.loaded:
            time.sleep(float(os.environ.get("RECORDING_METRIC_LOAD_SECONDS", "0")))
            devices = os.environ.get("CUDA_VISIBLE_DEVICES", "none")
            job = os.environ.get("SLURM_JOB_ID", "local")
            with open(os.environ["RECORDING_METRIC_FILE"], "a", encoding="utf-8") as handle:
                handle.write(f"LOAD {os.getpid()} {devices} {job}\n")
            self.loaded = True
        ratios = [
            len(mt) / max(len(ref), 1)
            for mt, ref in zip(rows["mt_text"], rows["ref_text"], strict=True)
        ]
        return {"length_ratio": ratios}


class ThinkingTranslator(RecordingTranslator):
    """Answers like a reasoning model: a <think> block, then the translation."""

    def translate(self, prompts: list[str]) -> list[str]:
        return [f"<think>\nLet me see: {len(p)} characters.\n</think>\n{t}" for p, t in
                zip(prompts, super().translate(prompts), strict=True)]  # fmt: skip


class PickyTranslator(RecordingTranslator):
    """Supports no direction into `refuse`, and says so before any work."""

    def __init__(self, record: str, refuse: str) -> None:
        super().__init__(record)
        self.refuse = refuse

    def check_directions(self, directions) -> None:
        unsupported = sorted({d.tgt_lang for d in directions if d.tgt_lang == self.refuse})
        if unsupported:
            raise ValueError(f"this model does not support {unsupported}")


class StreamingRecorder(RecordingTranslator):
    """A `BatchTranslator`: takes directions two at a time and finishes the second first."""

    def translate_batches(self, batches):
        held: list[tuple[int, list[str]]] = []
        for index, prompts in enumerate(batches):
            held.append((index, prompts))
            if len(held) == 2:
                for position, batch in reversed(held):
                    yield position, self.translate(batch)
                held = []
        for position, batch in held:
            yield position, self.translate(batch)
