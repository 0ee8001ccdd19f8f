"""The runner's stream of directions: each published as it finishes, failures and stalls named.

Translators here are small real ones (upper-casing the source); the dataset is the bundled
sample, and every test writes real files into a scratch folder.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bouquet_eval.core.jobs import INTERRUPTED_EXIT_STATUS
from bouquet_eval.core.pace import duration
from bouquet_eval.data.dataset import DatasetSource, Direction, resolve_dataset
from bouquet_eval.translation.stream import Flight
from bouquet_eval.translation.translate import (
    JobProgress,
    TranslationError,
    translate_directions,
)
from bouquet_eval.translation.watchdog import StallWatchdog, TranslatorStalled
from bouquet_eval.translators import BatchError
from bouquet_eval.translators.prompt import build_prompt

from .conftest import SAMPLE, patience, python_path

DIRECTIONS = [
    Direction.parse(name)
    for name in (
        "eng_Latn-fra_Latn",
        "eng_Latn-deu_Latn",
        "fra_Latn-eng_Latn",
        "eng_Latn-spa_Latn",
        "deu_Latn-eng_Latn",
    )
]
SETTINGS = {"translator": "tests"}


def source_text(prompt: str) -> str:
    return prompt.rsplit("\n", 1)[-1]


class Upper:
    """Upper-cases each prompt's last line; `calls` records the size of each call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def translate(self, prompts: list[str]) -> list[str]:
        self.calls.append(len(prompts))
        return [source_text(prompt).upper() for prompt in prompts]


class Backwards(Upper):
    """A `BatchTranslator` that takes three directions at a time and finishes the last first;
    it fails on the batch at `fail_at` once the ones before it are handed back."""

    def __init__(self, fail_at: int | None = None, error: Exception | None = None) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.error = error
        self.streams = 0

    def translate_batches(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        self.streams += 1
        source = enumerate(batches)
        while held := [item for _, item in zip(range(3), source, strict=False)]:
            for index, prompts in reversed(held):
                if index == self.fail_at:
                    raise self.error or BatchError(index, "the engine refused it")
                yield index, self.translate(prompts)


def run(
    tmp_path: Path,
    translator: Any,
    directions: list[Direction] = DIRECTIONS,
    stall_timeout: float | None = None,
    prompt_fn: Any = build_prompt,
) -> Path:
    output = tmp_path / "mymodel"
    dataset: DatasetSource = resolve_dataset({"path": str(SAMPLE)})
    translate_directions(
        directions,
        dataset,
        output,
        lambda: (translator, prompt_fn),
        SETTINGS,
        limit=4,
        stall_timeout=stall_timeout,
    )
    return output


def translations(output: Path, direction: Direction) -> list[str]:
    return pd.read_json(output / f"{direction}.jsonl", lines=True)["mt_text"].tolist()


def cached(output: Path) -> list[str]:
    return sorted(path.name for path in output.glob(".cache/*/*.jsonl"))


def test_a_batch_translator_gets_every_direction_in_one_stream(tmp_path: Path) -> None:
    plain = run(tmp_path / "plain", Upper())
    translator = Backwards()
    started = time.monotonic()
    streamed = run(tmp_path / "stream", translator)
    elapsed = time.monotonic() - started
    assert translator.streams == 1
    assert translator.calls == [4] * len(DIRECTIONS)
    for direction in DIRECTIONS:
        assert translations(streamed, direction) == translations(plain, direction)
        assert translations(streamed, direction)[0].isupper()
    records = [
        json.loads((streamed / ".timing" / f"{direction}.json").read_text())
        for direction in DIRECTIONS
    ]
    assert [record["sentences"] for record in records] == [4] * len(DIRECTIONS)
    # Shares of the job's time: together no more than the job took.
    assert 0 < sum(record["seconds"] for record in records) <= elapsed
    # Nothing left to do: the rerun does not even build the translator.
    again = Backwards()
    run(tmp_path / "stream", again)
    assert again.streams == 0


def test_plain_translators_get_one_call_per_direction(tmp_path: Path) -> None:
    translator = Upper()
    run(tmp_path, translator)
    assert translator.calls == [4] * len(DIRECTIONS)


def test_finished_directions_are_kept_when_the_stream_fails(tmp_path: Path) -> None:
    # Batches 0-2 come back 2, 1, then 0 fails: 2 and 1 are published, nothing else.
    with pytest.raises(TranslationError) as failure:
        run(tmp_path, Backwards(fail_at=0))
    assert str(failure.value) == (
        f"model mymodel, direction {DIRECTIONS[0]}: the engine refused it"
    )
    output = tmp_path / "mymodel"
    published = sorted(path.name for path in output.glob("*.jsonl"))
    assert published == sorted(f"{d}.jsonl" for d in DIRECTIONS[1:3])
    assert cached(output) == published
    # The rerun translates the others only.
    translator = Upper()
    run(tmp_path, translator)
    assert translator.calls == [4] * (len(DIRECTIONS) - 2)
    assert sorted(path.name for path in output.glob("*.jsonl")) == sorted(
        f"{d}.jsonl" for d in DIRECTIONS
    )


def test_a_failure_of_no_one_batch_names_the_directions_in_flight(tmp_path: Path) -> None:
    # Batches 0-2 were taken and 2, 1 handed back when the engine broke: 0 was in flight.
    with pytest.raises(TranslationError, match="direction eng_Latn-fra_Latn: the translator "
                       "failed: OSError: device lost"):  # fmt: skip
        run(tmp_path, Backwards(fail_at=0, error=OSError("device lost")))
    with pytest.raises(TranslationError) as failure:
        run(tmp_path / "other", Backwards(fail_at=4, error=OSError("device lost")))
    # Batches 3 and 4 were both taken, and neither handed back, when it broke.
    assert f"direction {DIRECTIONS[3]} (translated together with {DIRECTIONS[4]})" in str(
        failure.value
    )


def test_a_failing_prompt_function_names_its_direction(tmp_path: Path) -> None:
    def prompt_fn(src_lang: str, tgt_lang: str, text: str) -> str:
        if tgt_lang == "spa_Latn":
            raise KeyError("no name for spa_Latn")
        return text

    for translator in (Upper(), Backwards()):
        with pytest.raises(TranslationError, match=r"mymodel, direction eng_Latn-spa_Latn: the "
                           "prompt function failed: KeyError"):  # fmt: skip
            run(tmp_path / type(translator).__name__, translator, prompt_fn=prompt_fn)


class Returning:
    def __init__(self, returned: Any) -> None:
        self.returned = returned

    def translate(self, prompts: list[str]) -> Any:
        return self.returned(prompts) if callable(self.returned) else self.returned


@pytest.mark.parametrize(
    ("returned", "detail"),
    [
        (None, "the translator returned NoneType, not a list of 4 strings"),
        (7, "the translator returned int, not a list of 4 strings"),
        ("TEXT", "the translator returned str, not a list of 4 strings"),
        (lambda prompts: prompts[:3], "the translator returned 3 outputs for 4 sentences"),
        (lambda prompts: [*prompts[:3], b"x"], "output 4 of the translator is a bytes, not a str"),
        (
            lambda prompts: [*prompts[:2], "ok \udcff", "x"],
            "output 3 of the translator holds '\\udcff' at character 4, a lone surrogate that "
            "UTF-8 cannot encode",
        ),
    ],
    ids=["none", "int", "str", "too-few", "bytes", "surrogate"],
)
def test_a_wrong_result_names_model_and_direction(
    tmp_path: Path, returned: Any, detail: str
) -> None:
    with pytest.raises(TranslationError) as failure:
        run(tmp_path, Returning(returned), DIRECTIONS[:1])
    assert str(failure.value) == f"model mymodel, direction {DIRECTIONS[0]}: {detail}"
    assert not list((tmp_path / "mymodel").glob("*.jsonl"))
    assert not list((tmp_path / "mymodel").glob(".cache/*/*"))


class Hanging(Upper):
    """Hangs on the direction into `target`, as a translator waiting on a dead server."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target

    def translate(self, prompts: list[str]) -> list[str]:
        if prompts[0].startswith(self.target):
            time.sleep(600)
        return super().translate(prompts)


def test_a_translator_that_hangs_fails_naming_its_direction(tmp_path: Path) -> None:
    def prompt_fn(src_lang: str, tgt_lang: str, text: str) -> str:
        return f"{tgt_lang}\n{text}"

    # Without the watchdog, the translator would go on after 600 s, and raise nothing.
    stall_timeout = round(patience(1), 1)
    with pytest.raises(TranslatorStalled) as failure:
        run(tmp_path, Hanging("spa_Latn"), stall_timeout=stall_timeout, prompt_fn=prompt_fn)
    assert str(failure.value) == (
        "model mymodel, direction eng_Latn-spa_Latn: the translator made no progress for "
        f"{stall_timeout:g} s (stall_timeout); the directions finished before are kept"
    )
    assert cached(tmp_path / "mymodel") == sorted(f"{d}.jsonl" for d in DIRECTIONS[:3])


class Counting(Upper):
    """Takes 8 steps of `step` seconds a direction, counting them as it goes, as an engine
    does."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.usage = {"steps": 0}
        self.step = step

    def translate(self, prompts: list[str]) -> list[str]:
        for _ in range(8):
            time.sleep(self.step)
            self.usage["steps"] += 1
        return super().translate(prompts)


def test_counted_progress_keeps_a_slow_translator_going(tmp_path: Path) -> None:
    """A direction takes 1.6 times the stall timeout, in steps it counts."""
    stall_timeout = patience(1)
    translator = Counting(step=stall_timeout / 5)
    output = run(tmp_path, translator, DIRECTIONS[:2], stall_timeout=stall_timeout)
    assert translator.calls == [4, 4]
    record = json.loads((output / ".timing" / f"{DIRECTIONS[1]}.json").read_text())
    assert record["steps"] == 8


STUBBORN = textwrap.dedent(
    """
    import logging, sys, time
    from bouquet_eval.translation.watchdog import StallWatchdog

    logging.basicConfig(level=logging.INFO)
    with StallWatchdog(0.3, probe=lambda: 0, describe=lambda: "model m, direction d: stalled"):
        while True:  # swallows even interruptions, as a translator that retries for ever
            try:
                time.sleep(10)
            except BaseException as error:
                print("ignored", type(error).__name__, file=sys.stderr, flush=True)
    """
)


def test_a_translator_that_will_not_stop_ends_the_process() -> None:
    # It would loop for ever: the timeout fails the test.
    child = subprocess.run(
        [sys.executable, "-c", STUBBORN],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(), "PATH": ""},
        timeout=patience(60),
    )
    assert child.returncode == 3, child.stderr
    assert "model m, direction d: stalled" in child.stderr
    assert "ignored TranslatorStalled" in child.stderr
    assert child.stderr.rstrip().endswith(
        "the translator did not stop when interrupted; ending the process"
    )


def test_an_alarm_that_is_not_the_watchdogs_goes_to_its_own_handler() -> None:
    received = []

    def own(signum: int, frame: object) -> None:
        received.append(signum)

    previous = signal.signal(signal.SIGALRM, own)
    try:
        with StallWatchdog(60, probe=lambda: 0, describe=lambda: "unused"):
            signal.raise_signal(signal.SIGALRM)
        assert received == [signal.SIGALRM]
        assert signal.getsignal(signal.SIGALRM) is own
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_flight_shares_time_among_the_directions_in_it() -> None:
    now = [0.0]
    flight = Flight(clock=lambda: now[0])
    flight.take_off(0)
    now[0] = 2.0
    flight.take_off(1)
    now[0] = 4.0  # two in flight: 1 s each
    assert flight.land(0) == 3.0
    now[0] = 5.0
    flight.take_off(2)
    now[0] = 7.0
    assert flight.in_flight() == [1, 2]
    assert flight.land(2) == 1.0
    assert flight.land(1) == 3.0
    # Every second of the 7 went to some direction, once.
    assert (flight.pulled, flight.landed) == (3, 3)


def test_job_progress_estimates_the_time_left() -> None:
    now = [0.0]
    progress = JobProgress(4, clock=lambda: now[0])
    now[0] = 20.0
    assert progress.finished() == "1 of 4 directions done, about 60 s left"
    now[0] = 1200.0
    assert progress.finished() == "2 of 4 directions done, about 20 min left"
    now[0] = 2400.0
    assert progress.finished() == "3 of 4 directions done, about 13 min left"
    now[0] = 9000.0
    assert progress.finished() == "4 of 4 directions done in 2 h 30 min"
    assert duration(59.6) == "60 s"


JOB = textwrap.dedent(
    """
    import sys
    from bouquet_eval.core.jobs import job_logging
    from bouquet_eval.translation.translate import TranslationError

    with job_logging(sys.argv[1]):
        raise TranslationError("m", "eng_Latn-fra_Latn", "the translator returned\\nNoneType")
    """
)


def failed_job(script: str, log: Path, last: str) -> subprocess.CompletedProcess:
    """Run a job's `script`, which fails: its log and its stderr end with the line `last`."""
    child = subprocess.run(
        [sys.executable, "-c", script, str(log)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(), "PATH": ""},
        timeout=60,
    )
    assert child.returncode == 1
    assert log.read_text().splitlines()[-1].endswith(last)
    assert child.stderr.splitlines()[-1].endswith(last)
    return child


def test_a_failed_job_ends_its_log_with_one_line(tmp_path: Path) -> None:
    line = (
        "job failed: TranslationError: model m, direction eng_Latn-fra_Latn: the translator "
        "returned NoneType"
    )
    child = failed_job(JOB, tmp_path / "job.log", line)
    # The traceback is in the log, once.
    assert child.stderr.count("Traceback") == 1


INTERRUPTED_JOB = textwrap.dedent(
    """
    import atexit, sys
    from pathlib import Path
    from bouquet_eval.core.jobs import job_logging

    # Python's own end (collecting torch's and vLLM's objects) takes tens of seconds on a busy
    # machine: a job stopped by Ctrl-C skips it.
    atexit.register(Path(sys.argv[2]).touch)
    with job_logging(sys.argv[1]):
        raise KeyboardInterrupt
    """
)


# A child process (as vLLM's engine core) fails first, printing why; the parent says only that
# the cause is "above", as vLLM's LLM does.
CHILD_FAILS = textwrap.dedent(
    """
    import subprocess, sys
    from bouquet_eval.core.jobs import job_logging

    CHILD = "raise ValueError('No available memory for the cache blocks. Try increasing it.')"
    with job_logging(sys.argv[1]):
        subprocess.run([sys.executable, "-c", CHILD])
        raise RuntimeError("Engine core initialization failed. See root cause above.")
    """
)


def test_a_job_stopped_by_ctrl_c_ends_at_once_its_log_complete(tmp_path: Path) -> None:
    log, teardown = tmp_path / "job.log", tmp_path / "python-ended-as-usual"
    child = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_JOB, str(log), str(teardown)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(), "PATH": ""},
        timeout=60,
    )
    assert child.returncode == INTERRUPTED_EXIT_STATUS == 128 + signal.SIGINT
    assert log.read_text().splitlines()[-1].endswith("job stopped (interrupted)")
    assert not teardown.exists()


def test_a_cause_a_child_printed_is_in_the_last_line(tmp_path: Path) -> None:
    line = (
        "job failed: RuntimeError: Engine core initialization failed. See root cause above.; "
        "root cause: ValueError: No available memory for the cache blocks. Try increasing it."
    )
    failed_job(CHILD_FAILS, tmp_path / "job.log", line)
