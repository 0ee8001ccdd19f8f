"""The Batch API mode of the OpenAI-compatible translator (`mode: batch`).

A job's unanswered requests go into Batch API input files (at most `MAX_REQUESTS_PER_FILE`
requests and `MAX_BYTES_PER_FILE` bytes each), which are uploaded and turned into batches; the
batches are polled with a growing interval, their output files read into the request cache, and
each direction is handed back as soon as all its answers are in, as in the online mode.

Nothing is paid twice, whenever the job is killed: a journal beside the request cache records
each step before the next one starts (the uploaded file with the requests it holds, then the
batch made from it, then that the batch's results are in the cache), so a rerun polls the
batches it finds instead of submitting again. A kill between sending a create and recording its
batch is covered too: a file recorded without a batch is looked for among the account's batches
(by input file) before one is made from it. Requests a batch did not answer (it failed, expired,
or the request itself failed) go into a later batch, up to `max_retries` more times in a job,
and are then named as in the online mode.

The journal is a folder of append-only JSON Lines files, one per job, as the cache is (see
`request_cache`), so that the jobs of one model may share it; a job takes up only the batches
that hold requests it needs.

Waiting: batches take up to 24 hours. A job polls until its batches end, logging what is
pending at each look, unless `batch_wait` seconds pass first: it then stops with an error that
says the batches are still pending, keeping every direction already published, and the same
command run later polls the same batches. With `batch_wait` a cluster run submits, frees its
slot, and is picked up by a later run (see docs/api-models.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from bouquet_eval.core.secrets import scrub
from bouquet_eval.translators import BatchError
from bouquet_eval.translators.openai_reply import Answer, Usage, read_reply
from bouquet_eval.translators.request_cache import RequestCache, append_durably, create_own_file

if TYPE_CHECKING:
    import openai


log = logging.getLogger(__name__)

# The Batch API's limits on one input file (OpenAI's: 50,000 requests, 200 MB).
MAX_REQUESTS_PER_FILE = 50_000
MAX_BYTES_PER_FILE = 190_000_000
ENDPOINT: Final = "/v1/chat/completions"
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
MAX_POLL_INTERVAL = 300.0


class BatchSender(Protocol):
    """What a batch run needs of the translator it sends for (`OpenAIChatTranslator`)."""

    cache: RequestCache | None
    api_key_env: str | None
    usage: Usage
    max_retries: int
    retry_backoff: float
    batch_poll_interval: float
    batch_wait: float | None

    def request_headers(self) -> dict[str, Any]: ...
    def request_body(self, prompt: str) -> dict[str, Any]: ...
    def key(self, prompt: str) -> str: ...
    def count(self, answer: Answer) -> None: ...


class BatchesPending(RuntimeError):
    """Batches still running when the job's `batch_wait` ran out; a rerun picks them up."""


@dataclass
class Journal:
    """What this and earlier jobs submitted: files with their keys, batches, batches read."""

    directory: Path
    files: dict[str, list[str]] = field(default_factory=dict)
    batch_of_file: dict[str, str] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)
    _path: Path | None = None

    @classmethod
    def load(cls, directory: Path) -> Journal:
        journal = cls(directory)
        for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
            for line in path.read_bytes().splitlines():
                try:
                    journal._apply(json.loads(line))
                except (ValueError, KeyError, TypeError):  # a line torn by a crash
                    continue
        return journal

    def record(self, entry: dict[str, Any]) -> None:
        if self._path is None:
            self._path = create_own_file(self.directory)
        append_durably(self._path, json.dumps(entry) + "\n")
        self._apply(entry)

    def _apply(self, entry: dict[str, Any]) -> None:
        if "keys" in entry:
            self.files[entry["file"]] = list(entry["keys"])
        elif "batch" in entry:
            self.batch_of_file[entry["file"]] = entry["batch"]
        else:
            self.read.add(entry["read"])


@dataclass
class Results:
    """What a batch's output and error files say, by request key."""

    answers: dict[str, Answer] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


class BatchRun:
    """One `translate_batches` stream in batch mode; see the module docstring."""

    def __init__(self, translator: BatchSender, client: openai.OpenAI) -> None:
        if translator.cache is None:
            raise ValueError("mode batch needs a request cache (cache_dir)")
        self.translator = translator
        self.cache = translator.cache
        self.client = client
        self.headers = translator.request_headers()
        self.journal = Journal.load(self.cache.directory / "batches")
        # Answers read in this job, until their direction is handed back and their tokens counted
        # (so that each direction's counts are its own).
        self.uncounted: dict[str, Answer] = {}
        self.failures: dict[str, str] = {}
        self.attempts: dict[str, int] = {}

    def stream(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        # Every direction at once: what batches are for.
        prompts_of: dict[str, str] = {}
        directions = []
        for prompts in batches:
            keys = [self.translator.key(prompt) for prompt in prompts]
            prompts_of.update(zip(keys, prompts, strict=True))
            directions.append(keys)
        waiting = dict(enumerate(directions))
        answers = self.cache.answers()
        self.translator.usage.cache_hits += sum(key in answers for key in prompts_of)
        yield from self._finished(waiting)
        open_batches = self._resume(set(prompts_of) - set(answers))
        started = time.monotonic()
        interval = self.translator.batch_poll_interval
        while waiting:
            unanswered = {key for keys in waiting.values() for key in keys} - set(answers)
            submitted = {key for batch in open_batches for key in self._keys_of_batch(batch)}
            if not open_batches:
                self._check_attempts(unanswered, waiting)
            to_submit = sorted(unanswered - submitted)
            if to_submit:
                open_batches += self._submit(to_submit, prompts_of)
                interval = self.translator.batch_poll_interval
            self._log_pending(open_batches, unanswered, waiting)
            time.sleep(interval)
            interval = min(interval * 2, MAX_POLL_INTERVAL)
            open_batches = [batch for batch in open_batches if not self._poll(batch)]
            yield from self._finished(waiting)
            # Checked after a look at the batches, so that a job run only to pick them up
            # (batch_wait: 0) does look.
            wait = self.translator.batch_wait
            if waiting and open_batches and wait is not None and time.monotonic() - started >= wait:
                raise BatchesPending(
                    f"{len(open_batches)} batches still pending after {wait:g} s "
                    f"({', '.join(open_batches)}); run the same command again later to pick "
                    "them up (nothing is submitted again)"
                )

    def _finished(self, waiting: dict[int, list[str]]) -> Iterator[tuple[int, list[str]]]:
        """Hand back the waiting directions whose answers are all in, counting their tokens."""
        answers = self.cache.answers()
        for index, keys in list(waiting.items()):
            if all(key in answers for key in keys):
                del waiting[index]
                for key in dict.fromkeys(keys):
                    answer = self.uncounted.pop(key, None)
                    if answer is not None:
                        self.translator.count(answer)
                yield index, [answers[key] for key in keys]

    def _check_attempts(self, unanswered: set[str], waiting: dict[int, list[str]]) -> None:
        """Fail, naming the first prompt, once a request has had all its attempts."""
        limit = self.translator.max_retries + 1
        spent = {key for key in unanswered if self.attempts.get(key, 0) >= limit}
        if not spent:
            return
        for index, keys in sorted(waiting.items()):
            for position, key in enumerate(keys):
                if key in spent:
                    raise BatchError(
                        index,
                        f"prompt {position + 1}: gave up after {limit} batches; the last one: "
                        f"{self.failures.get(key, 'no answer')} ({len(spent) - 1} other "
                        "requests failed as well; the answers received are kept)",
                    )

    def _resume(self, needed: set[str]) -> list[str]:
        """The batches of earlier jobs still worth polling; files uploaded but never made into
        a batch are made into one now, unless the account has one from them already."""
        open_batches = []
        orphans = [
            file_id
            for file_id, keys in self.journal.files.items()
            if file_id not in self.journal.batch_of_file and needed.intersection(keys)
        ]
        for file_id in orphans:
            found = self._made_from(file_id)
            if found is None:
                self._create(file_id)
            else:
                self.journal.record({"batch": found, "file": file_id})
                log.info("batch %s: found, made from %s before a restart", found, file_id)
        for file_id, batch_id in self.journal.batch_of_file.items():
            if batch_id not in self.journal.read and needed.intersection(
                self.journal.files.get(file_id, ())
            ):
                log.info("batch %s: submitted before, polled again", batch_id)
                open_batches.append(batch_id)
        return open_batches

    def _keys_of_batch(self, batch_id: str) -> list[str]:
        for file_id, made in self.journal.batch_of_file.items():
            if made == batch_id:
                return self.journal.files.get(file_id, [])
        return []

    def _submit(self, keys: list[str], prompts_of: dict[str, str]) -> list[str]:
        made = []
        for chunk in input_files(keys, prompts_of, self.translator.request_body):
            uploaded = self.client.files.create(
                file=("requests.jsonl", chunk.content),
                purpose="batch",
                extra_headers=self.headers,
            )
            # Recorded before the batch exists, so that a kill from here on costs nothing.
            self.journal.record({"file": uploaded.id, "keys": chunk.keys})
            made.append(self._create(uploaded.id))
            for key in chunk.keys:
                self.attempts[key] = self.attempts.get(key, 0) + 1
            self.translator.usage.requests += len(chunk.keys)
            log.info("batch %s: %d requests submitted", made[-1], len(chunk.keys))
        return made

    def _create(self, file_id: str) -> str:
        """A batch of the uploaded file's requests, made once.

        The client's own retries are off here: a create whose reply was lost may have made its
        batch, so the account's batches are looked at before another create is sent.
        """
        import openai

        client = self.client.with_options(max_retries=0)
        for attempt in range(self.translator.max_retries + 1):
            try:
                batch_id = client.batches.create(
                    input_file_id=file_id,
                    endpoint=ENDPOINT,
                    completion_window="24h",
                    metadata={"made_by": "bouquet-eval"},
                    extra_headers=self.headers,
                ).id
                break
            except (openai.APIConnectionError, openai.InternalServerError) as error:
                found = self._made_from(file_id)
                if found is not None:
                    batch_id = found
                    break
                if attempt == self.translator.max_retries:
                    raise
                log.warning("batch of %s: not made (%s); trying again", file_id, error)
                time.sleep(self.translator.retry_backoff * 2**attempt)
        self.journal.record({"batch": batch_id, "file": file_id})
        return batch_id

    def _made_from(self, file_id: str) -> str | None:
        """The account's batch made from `file_id`, if there is one."""
        for batch in self.client.batches.list(extra_headers=self.headers):
            if batch.input_file_id == file_id:
                return batch.id
        return None

    def _poll(self, batch_id: str) -> bool:
        """Look at a batch once; if it has ended, read its results. True if it has ended."""
        import openai

        self.translator.usage.polls += 1
        try:
            batch = self.client.batches.retrieve(batch_id, extra_headers=self.headers)
        except (openai.APIConnectionError, openai.InternalServerError) as error:
            log.warning(
                "batch %s: could not be looked at (%s); trying again later", batch_id, error
            )
            return False
        if batch.status not in ENDED:
            return False
        results = Results()
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = self.client.files.content(file_id, extra_headers=self.headers).content
                read_results(content, results)
        for key in self._keys_of_batch(batch_id):
            if key not in results.answers and key not in results.failures:
                results.failures[key] = f"the batch {batch.status} ({_batch_errors(batch)})"
        # The answers are in the cache before the batch is marked read; an endpoint may echo
        # the key it was sent, which is kept nowhere (a server without keys was sent none: the
        # client's placeholder is no secret).
        secrets = [self.client.api_key] if self.translator.api_key_env is not None else []
        self.cache.append(
            [(key, scrub(answer.content, secrets)) for key, answer in results.answers.items()]
        )
        self.uncounted.update(results.answers)
        self.failures.update(results.failures)
        self.journal.record({"read": batch_id})
        log.info(
            "batch %s: %s, %d answered, %d failed",
            batch_id,
            batch.status,
            len(results.answers),
            len(results.failures),
        )
        return True

    def _log_pending(
        self, open_batches: list[str], unanswered: set[str], waiting: dict[int, list[str]]
    ) -> None:
        if open_batches:
            log.info(
                "waiting for %d batches (%s): %d requests unanswered, %d directions pending",
                len(open_batches),
                ", ".join(open_batches),
                len(unanswered),
                len(waiting),
            )


@dataclass(frozen=True)
class InputFile:
    keys: list[str]
    content: bytes


def input_files(keys: list[str], prompts_of: dict[str, str], request: Any) -> Iterator[InputFile]:
    """Batch API input files for `keys`, within the limits on requests and bytes per file."""
    chunk: list[str] = []
    lines: list[bytes] = []
    size = 0
    for key in keys:
        line = (
            json.dumps(
                {
                    "custom_id": key,
                    "method": "POST",
                    "url": ENDPOINT,
                    "body": request(prompts_of[key]),
                },
                ensure_ascii=False,
            )
            + "\n"
        ).encode()
        if chunk and (len(chunk) == MAX_REQUESTS_PER_FILE or size + len(line) > MAX_BYTES_PER_FILE):
            yield InputFile(chunk, b"".join(lines))
            chunk, lines, size = [], [], 0
        chunk.append(key)
        lines.append(line)
        size += len(line)
    if chunk:
        yield InputFile(chunk, b"".join(lines))


def read_results(content: bytes, results: Results) -> None:
    """Add the answers and failures of an output or error file to `results`."""
    for line in content.splitlines():
        try:
            result = json.loads(line)
            key = result["custom_id"]
        except (ValueError, KeyError, TypeError):  # not a result line: nothing to take from it
            continue
        response = result.get("response") or {}
        status = response.get("status_code")
        if status == 200:
            reply = read_reply(json.dumps(response.get("body")).encode())
            if isinstance(reply, Answer):
                results.answers[key] = reply
            else:
                results.failures[key] = reply.reason
            continue
        error = result.get("error") or (response.get("body") or {}).get("error") or {}
        message = error.get("message") if isinstance(error, dict) else None
        prefix = f"HTTP {status}: " if status else ""
        results.failures[key] = f"{prefix}{message or error}"


def _batch_errors(batch: Any) -> str:
    errors = getattr(batch, "errors", None)
    data = getattr(errors, "data", None) or []
    messages = [getattr(item, "message", None) or str(item) for item in data]
    return "; ".join(message for message in messages if message) or "no reason given"
