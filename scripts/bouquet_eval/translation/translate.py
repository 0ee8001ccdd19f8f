"""Translating directions: resumable per direction, with the translator loaded at most once.

The directions of a job that need translating go through the translator as one stream
(`bouquet_eval.translation.stream`): a translator that can take many directions at once keeps
working across direction boundaries, and each direction is published atomically as soon as its last
translation is back. A job killed half-way keeps every direction published; the rerun skips
them before it loads a model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bouquet_eval.core.environment import hub_model, job_environment
from bouquet_eval.core.freshness import ResumableOutput, remove_stray_temporaries
from bouquet_eval.core.io import write_json, write_jsonl
from bouquet_eval.core.pace import duration
from bouquet_eval.core.secrets import SECRET_VARIABLES, refuse_secrets, scrub, secret_values
from bouquet_eval.data.dataset import DatasetError, DatasetSource, Direction
from bouquet_eval.data.outputs import translation_output
from bouquet_eval.planning.plan import ModelPlan, plan_model, translation_settings
from bouquet_eval.translation.stream import Flight, translation_stream
from bouquet_eval.translation.watchdog import StallWatchdog
from bouquet_eval.translators import (
    BatchError,
    RowTranslator,
    Translator,
    load_prompt_fn,
    load_translator,
)
from bouquet_eval.translators.backends import prompt_fn_spec, translator_arguments
from bouquet_eval.translators.prompt import PromptFn
from bouquet_eval.translators.provided import provided_file
from bouquet_eval.translators.reasoning import strip_reasoning

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

TIMING_DIR = ".timing"
"""Per-direction timing records beside the translations (see `timing_record`)."""


def translate_model(
    model: dict[str, Any],
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    limit: int | None = None,
    stall_timeout: float | None = None,
) -> None:
    """Translate `directions` with a model entry of the workflow configuration.

    `stall_timeout`: fail when the translator makes no progress for this many seconds.
    """
    # An entry given by hand holds no secret either: its settings are written as they are.
    refuse_secrets(model)
    planned = plan_model(model, output_dir, limit)
    translate_planned(
        planned, {"limit": limit, "models": [planned.entry]}, directions, dataset, stall_timeout
    )


def translate_planned(
    model: ModelPlan,
    settings: Mapping[str, Any],
    directions: Sequence[Direction],
    dataset: DatasetSource,
    stall_timeout: float | None = None,
    secrets: Iterable[str] | None = None,
) -> None:
    """Translate `directions` with a model of the plan, into its folder (see translate_model).

    `settings`: what decides its translations, its translate jobs' slice of the configuration
    (`limit`, and its entry as `models[0]`); what changes only their speed is the plan's
    (`ModelPlan.operational`). `secrets`: the secret values to scrub from its translations
    (those of the run's secret variables, `Plan.secrets`); by default, those of
    SECRET_VARIABLES and its `api_key_env`."""
    entry, limit = settings["models"][0], settings["limit"]
    if secrets is None:
        variables = [*SECRET_VARIABLES, *([model.api_key_env] if model.api_key_env else [])]
        secrets = secret_values(variables)

    def make_translator() -> tuple[Translator | RowTranslator, PromptFn]:
        arguments = {**translator_arguments(entry), **model.operational}
        if model.request_cache is not None:
            # Every answer is kept as it arrives, so that no paid request is ever sent twice.
            arguments["cache_dir"] = str(model.request_cache)
        if model.takes_limit:
            arguments["limit"] = limit
        return (
            load_translator(entry["translator"], arguments),
            load_prompt_fn(prompt_fn_spec(entry), entry.get("prompt_kwargs")),
        )

    def describe_environment() -> dict[str, Any]:
        environment = job_environment(uses_gpu=model.gpus > 0)
        if model.weights is not None:
            environment["model"] = hub_model(*model.weights)
        return environment

    translate_directions(
        directions,
        dataset,
        model.folder,
        make_translator,
        translation_settings(entry, limit),
        limit,
        None if model.provided is None else partial(provided_file, model.provided),
        describe_environment,
        stall_timeout,
        secrets,
    )


class TranslationError(RuntimeError):
    """A direction could not be translated; the message names the model and the direction."""

    def __init__(self, model: str, direction: str, detail: str) -> None:
        super().__init__(f"model {model}, direction {direction}: {detail}")


@dataclass(frozen=True)
class Work:
    """A direction to translate and where its translations go."""

    direction: Direction
    output: ResumableOutput


def translate_directions(
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    make_translator: Callable[[], tuple[Translator | RowTranslator, PromptFn]],
    settings: dict[str, Any],
    limit: int | None = None,
    provided: Callable[[Direction], Path] | None = None,
    describe_environment: Callable[[], dict[str, Any]] = lambda: job_environment(False),
    stall_timeout: float | None = None,
    secrets: Iterable[str] | None = None,
) -> None:
    """Write `<output_dir>/<src>-<tgt>.jsonl` for every direction that is not current.

    Every known secret a translation holds is replaced before it is written (an endpoint may
    echo its key): `secrets`, by default the values of SECRET_VARIABLES.

    `make_translator` is called only when some direction needs translating, so a rerun that
    finds everything done loads no model. `settings` (real values) decide the translations
    with the direction's dataset file; `provided`, when given, names a file of translations
    made elsewhere that each direction is made from too. `describe_environment()`, called
    once the translator is ready, says what the job runs with, for the manifest. Errors name
    the model, taken to be the name of `output_dir`.
    """
    work = directions_to_translate(directions, dataset, output_dir, settings, provided)
    if not work:
        return
    known = frozenset(secret_values(SECRET_VARIABLES) if secrets is None else secrets)
    translator, prompt_fn = _start(make_translator, directions)
    environment = describe_environment()
    model = output_dir.name
    flight = Flight()
    progress = JobProgress(len(work))
    watchdog = StallWatchdog(
        stall_timeout,
        # A translator may count what it does within a direction (requests sent, decoding
        # steps of a batch).
        probe=lambda: (
            flight.pulled,
            flight.landed,
            usage_counters(translator),
            getattr(translator, "requests_sent", None),
            getattr(translator, "decoding_steps", None),
        ),
        describe=lambda: stalled_message(model, work, flight, stall_timeout),
    )
    # Sentences are read as the translator takes their direction, and dropped once it is
    # published: a job holds those of the directions in flight, not of all of its own.
    held: dict[int, pd.DataFrame] = {}

    def sentences() -> Iterator[pd.DataFrame]:
        for position, item in enumerate(work):
            held[position] = dataset.load(item.direction, limit)
            yield held[position]

    before = usage_counters(translator)
    stream = translation_stream(translator, prompt_fn, sentences(), flight)
    with watchdog, contextlib.closing(stream):
        for position, returned in attributed(stream, work, flight, model):
            item, rows = work[position], held.pop(position)
            seconds = flight.land(position)
            translations = checked_translations(returned, len(rows), model, item.direction)
            if known:
                translations = [scrub(text, known) for text in translations]
            counters = usage_counters(translator)
            counted = {key: value - before.get(key, 0) for key, value in counters.items()}
            before = counters
            record = timing_record(item.direction, len(rows), seconds, counted)
            try:
                item.output.publish(
                    partial(write_jsonl, frame=translation_frame(rows, translations)), environment
                )
                write_json(output_dir / TIMING_DIR / f"{item.direction}.json", record)
            except OSError as error:
                raise TranslationError(
                    model, str(item.direction), f"its translations cannot be written: {error}"
                ) from error
            log.info(
                "%s: %d sentences, %.2f s (%.1f sentences/s); %s",
                item.direction,
                len(rows),
                record["seconds"],
                record["sentences_per_second"] or 0,
                progress.finished(),
            )


def directions_to_translate(
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    settings: dict[str, Any],
    provided: Callable[[Direction], Path] | None,
) -> list[Work]:
    """The directions whose translations are neither current nor restorable from the cache
    (those are restored here), in order."""
    outputs = {
        direction: translation_output(
            output_dir,
            direction,
            settings,
            dataset.file(direction),
            None if provided is None else provided(direction),
        )
        for direction in directions
    }
    remove_stray_temporaries(outputs.values())
    work = []
    total = len(directions)
    for position, (direction, output) in enumerate(outputs.items(), start=1):
        progress = f"[{position}/{total}] {direction}"
        if output.is_current():
            log.info("%s: up to date", progress)
        elif output.restore_from_cache():
            log.info("%s: restored from %s", progress, output.cached)
        else:
            work.append(Work(direction, output))
    log.info("%d of %d directions to translate", len(work), total)
    return work


def _start(
    make_translator: Callable[[], tuple[Translator | RowTranslator, PromptFn]],
    directions: Sequence[Direction],
) -> tuple[Translator | RowTranslator, PromptFn]:
    started = time.monotonic()
    translator, prompt_fn = make_translator()
    check = getattr(translator, "check_directions", None)
    if check is not None:
        check(directions)
    load = getattr(translator, "load", None)
    if callable(load):
        load()
    log.info("translator ready in %.1f s", time.monotonic() - started)
    return translator, prompt_fn


class JobProgress:
    """How many of a job's directions are done, and an estimate of the time left."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self._clock = clock
        self._started = clock()

    def finished(self) -> str:
        """Count one more direction done; say where the job stands."""
        self.done += 1
        elapsed = self._clock() - self._started
        status = f"{self.done} of {self.total} directions done"
        if self.done == self.total:
            return f"{status} in {duration(elapsed)}"
        left = elapsed / self.done * (self.total - self.done)
        return f"{status}, about {duration(left)} left"


def attributed(
    stream: Iterable[tuple[int, object]], work: Sequence[Work], flight: Flight, model: str
) -> Iterator[tuple[int, object]]:
    """The stream, with its failures turned into errors that name the direction at fault."""
    results = iter(stream)
    while True:
        try:
            position, returned = next(results)
        except StopIteration:
            return
        except (TranslationError, DatasetError):
            raise
        except BatchError as error:
            direction = str(work[error.index].direction)
            raise TranslationError(model, direction, str(error)) from error
        except Exception as error:
            detail = f"the translator failed: {type(error).__name__}: {error}"
            raise TranslationError(model, in_flight(work, flight), detail) from error
        yield position, returned


def in_flight(work: Sequence[Work], flight: Flight) -> str:
    """The direction the translator was on: the oldest it held, and how many others."""
    positions = flight.in_flight() or [min(flight.pulled, len(work) - 1)]
    names = [str(work[position].direction) for position in positions]
    if len(names) == 1:
        return names[0]
    others = ", ".join(names[1:4]) + (", ..." if len(names) > 4 else "")
    return f"{names[0]} (translated together with {others})"


def stalled_message(model: str, work: Sequence[Work], flight: Flight, timeout: float | None) -> str:
    return str(
        TranslationError(
            model,
            in_flight(work, flight),
            f"the translator made no progress for {timeout:g} s (stall_timeout); the "
            "directions finished before are kept",
        )
    )


def checked_translations(
    returned: object, sentences: int, model: str, direction: Direction
) -> list[str]:
    """What a translator returned for a direction, if it is one string per sentence that
    can be written as UTF-8; otherwise an error naming the model and the direction."""

    def fail(detail: str) -> TranslationError:
        return TranslationError(model, str(direction), detail)

    if returned is None or isinstance(returned, (str, bytes)) or not hasattr(returned, "__iter__"):
        raise fail(
            f"the translator returned {type(returned).__name__}, not a list of {sentences} strings"
        )
    translations = list(cast(Iterable[object], returned))
    if len(translations) != sentences:
        raise fail(f"the translator returned {len(translations)} outputs for {sentences} sentences")
    for number, text in enumerate(translations, start=1):
        if not isinstance(text, str):
            raise fail(f"output {number} of the translator is a {type(text).__name__}, not a str")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise fail(
                f"output {number} of the translator holds {text[error.start]!r} at character "
                f"{error.start + 1}, a lone surrogate that UTF-8 cannot encode"
            ) from None
    return cast(list[str], translations)  # every item was checked to be a str above


def usage_counters(translator: Any) -> dict[str, float]:
    """A translator's cumulative counters (requests, tokens, ...), where it keeps any.

    Only reads attributes, so that another thread (the stall watchdog) may call it while the
    translator counts.
    """
    usage = getattr(translator, "usage", None) or getattr(translator, "stats", None)
    if dataclasses.is_dataclass(usage) and not isinstance(usage, type):
        usage = {field.name: getattr(usage, field.name) for field in dataclasses.fields(usage)}
    if not isinstance(usage, dict):
        return {}
    return {key: value for key, value in usage.items() if isinstance(value, (int, float))}


def timing_record(
    direction: Direction, sentences: int, seconds: float, counted: dict[str, float]
) -> dict[str, Any]:
    """A direction's share of the job's translation time, with what the translator counted
    since the previous direction finished."""
    record: dict[str, Any] = {
        "src_lang": direction.src_lang,
        "tgt_lang": direction.tgt_lang,
        "sentences": sentences,
        "seconds": round(seconds, 3),
        "sentences_per_second": round(sentences / seconds, 3) if seconds > 0 else None,
        **counted,
    }
    generated = counted.get("completion_tokens") or counted.get("generated_tokens")
    if generated and seconds > 0:
        record["output_tokens_per_second"] = round(generated / seconds, 3)
    return record


def translation_frame(rows: pd.DataFrame, raw: list[str]) -> pd.DataFrame:
    """The JSONL rows. Reasoning a model printed before its answer is not scored: mt_text
    holds the answer alone, and mt_raw the whole output when the two differ anywhere."""
    import pandas as pd

    translations = [strip_reasoning(text) for text in raw]
    frame = pd.DataFrame(
        {
            "src_lang": rows["src_lang"],
            "tgt_lang": rows["tgt_lang"],
            "src_text": rows["src_text"],
            "ref_text": rows["tgt_text"],
            "mt_text": translations,
            "uniq_id": rows["uniq_id"],
        }
    )
    if translations != raw:
        frame["mt_raw"] = raw
    return frame
