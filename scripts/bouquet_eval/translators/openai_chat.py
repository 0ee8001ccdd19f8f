"""Translating through an OpenAI-compatible chat-completions API (OpenAI, vLLM, llama.cpp, …).

One chat request per prompt, `concurrency` at a time, through the `openai` package's async
client (its timeouts, and the proxies the environment names: HTTPS_PROXY, HTTP_PROXY, ALL_PROXY,
NO_PROXY) over its aiohttp transport, which spends a third of the CPU per request of its default
one, whose connection pool scans every connection for each request
(benchmarks/openai_concurrency.py). With `translate_batches` (many directions as one stream), the
next direction's requests start as soon as the previous direction's last ones leave room, so
`concurrency` requests stay in flight across direction boundaries instead of dwindling to the
slowest answer of each direction. The translation is the reply's raw `content`, reasoning
included; callers remove it with `reasoning.strip_reasoning`.

Requests go through the client's generic `post`, and replies are read raw and parsed here,
rather than through `chat.completions.create` and its models: a proxy's error page or a reply
without choices is then a retryable fault named as such, and neither the request's typed
transformation nor a reply model is built per request (together half the client's CPU).

One retry loop covers every failure, so a prompt costs `max_retries` + 1 attempts at most; the
client's own retries are off, as they would multiply that bound and do not cover malformed
replies. Retried: 408, 409, 429, 5xx, timeouts, dropped connections and malformed replies (a
200 that is not JSON, has no `choices` or has a null `content`), after `Retry-After`/
`retry-after-ms` when the server sends one, else after an exponential backoff. A server that
asks for a longer wait than `MAX_RETRY_AFTER` (a daily quota) fails the prompt at once rather
than being retried early. Any other status fails at once with the server's message; redirects
are not followed (a redirected POST may be resent as a GET), but named.

API key: read from the environment variable named by `api_key_env` when a stream starts, and
never stored on the translator, written to the cache or left in a message (server messages
that quote it are scrubbed). `api_key_env=None` is for servers that need no key, such as a local
vLLM: no Authorization header is sent. An unset variable is otherwise an error, so that a
forgotten key is caught before any request rather than reported as 401s.

With `cache_dir`, every answer is written to disk as soon as it arrives (see
`request_cache.RequestCache`), so a rerun after a crash or a kill sends only the requests that
had not been answered.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import logging
import os
import random
import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.core.secrets import scrub
from bouquet_eval.translators import BatchError
from bouquet_eval.translators.openai_batch import BatchRun
from bouquet_eval.translators.openai_reply import Answer, Failure, Usage, excerpt, read_reply
from bouquet_eval.translators.request_cache import CacheWriter, RequestCache

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

# Where requests go when neither `base_url` nor OPENAI_BASE_URL says otherwise, as for the
# official clients.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUSES = frozenset({408, 409, 429})  # and every status from 500 on
# A longer wait than this (e.g. a daily quota) is better reported than slept through.
MAX_RETRY_AFTER = 120.0
MAX_BACKOFF = 8.0


class MissingAPIKeyError(RuntimeError):
    pass


class ChatRequestError(RuntimeError):
    """A prompt that got no answer; `index` is its position in its batch (the list given to
    `translate`), `batch` the batch's position in a `translate_batches` stream. Messages count
    prompts from 1, as rows and lines are counted everywhere else."""

    def __init__(self, index: int, detail: str, batch: int = 0) -> None:
        super().__init__(f"prompt {index + 1}: {detail}")
        self.index = index
        self.detail = detail
        self.batch = batch


@dataclass
class _Session:
    """What the requests of one stream (or `translate` call) share."""

    client: openai.AsyncOpenAI
    secret: str | None
    # Sent with each request: the explicit absence of Authorization for a keyless server.
    headers: Mapping[str, Any]
    semaphore: asyncio.Semaphore
    writer: CacheWriter | None
    failures: list[ChatRequestError] = field(default_factory=list)

    def scrub(self, text: str) -> str:
        return scrub(text, [self.secret]) if self.secret else text


class OpenAIChatTranslator:
    """A `Translator` backed by a chat-completions endpoint; see the module docstring.

    `usage` holds the counters; `retry_backoff` is the first wait, in seconds, between attempts
    when the server does not say how long to wait (doubling each retry, up to 8 s).
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        concurrency: int = 16,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        seed: int | None = 0,
        system_prompt: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 6,
        extra_body: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        retry_backoff: float = 0.5,
        mode: str = "online",
        batch_poll_interval: float = 30.0,
        batch_wait: float | None = None,
    ) -> None:
        if mode not in ("online", "batch"):
            raise ValueError(f"mode must be online or batch, not {mode!r}")
        if mode == "batch" and cache_dir is None:
            raise ValueError("mode batch needs a request cache (cache_dir) to resume from")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, not {max_retries}")
        if timeout <= 0 or retry_backoff < 0:
            raise ValueError("timeout must be positive and retry_backoff not negative")
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.system_prompt = system_prompt
        self.timeout = timeout
        self.max_retries = max_retries
        self.extra_body = extra_body
        self.retry_backoff = retry_backoff
        self.mode = mode
        self.batch_poll_interval = batch_poll_interval
        self.batch_wait = batch_wait
        self.cache = RequestCache(Path(cache_dir)) if cache_dir is not None else None
        self.usage = Usage()
        # Requests sent so far, counted as they go (`usage` counts a direction's when it is
        # handed back): the stall watchdog sees a long direction's progress.
        self.requests_sent = 0
        self._api_key()  # a missing key fails here, before any direction is started

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.endpoint()!r}, "
            f"api_key_env={self.api_key_env!r}, concurrency={self.concurrency})"
        )

    def endpoint(self) -> str:
        """The base URL requests go to: `base_url`, else OPENAI_BASE_URL, else OpenAI's."""
        url = self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        return url.rstrip("/")

    def translate(self, prompts: list[str]) -> list[str]:
        for _, answers in self._stream([prompts]):
            return answers
        return []

    def translate_batches(self, batches: Iterable[list[str]]) -> Generator[tuple[int, list[str]]]:
        """See `bouquet_eval.translators.BatchTranslator`; one session for every batch."""
        try:
            yield from self._stream(batches)
        except ChatRequestError as error:
            raise BatchError(error.batch, str(error)) from error

    def _stream(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        if self.mode == "batch":
            yield from self._batch_stream(batches)
            return
        # The event loop runs while this generator waits for the next finished batch, and
        # pauses while the caller handles one (writing a file: milliseconds).
        loop = asyncio.new_event_loop()
        stream: _Stream | None = None
        try:
            stream = loop.run_until_complete(self._open(enumerate(batches)))
            while (finished := loop.run_until_complete(stream.next_finished())) is not None:
                yield finished
        finally:
            if stream is not None:
                loop.run_until_complete(stream.close())
            loop.close()

    def _batch_stream(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        import openai

        # The client's own retries cover uploads, creates and downloads, which are not paid.
        with openai.OpenAI(**self._client_options(), max_retries=self.max_retries) as client:
            yield from BatchRun(self, client).stream(batches)

    async def _open(self, batches: Iterator[tuple[int, list[str]]]) -> _Stream:
        import httpx2
        import openai

        client = openai.AsyncOpenAI(
            **self._client_options(),
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(
                follow_redirects=False,
                limits=httpx2.Limits(max_connections=self.concurrency),
            ),
        )
        session = _Session(
            client,
            self._api_key(),
            self.request_headers(),
            asyncio.Semaphore(self.concurrency),
            CacheWriter(self.cache) if self.cache is not None else None,
        )
        return _Stream(self, session, batches)

    def _client_options(self) -> dict[str, Any]:
        # One INFO line per request would drown the job log.
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        return {
            # The client insists on a key; a keyless server gets no Authorization header.
            "api_key": self._api_key() or "unused",
            "base_url": self.endpoint(),
            "timeout": self.timeout,
            "default_headers": {"User-Agent": f"bouquet-eval/{_version()}"},
        }

    def request_headers(self) -> dict[str, Any]:
        """Headers for each request: no Authorization at all for a server without keys."""
        import openai

        return {} if self.api_key_env is not None else {"Authorization": openai.omit}

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise MissingAPIKeyError(
                f"the environment variable {self.api_key_env} is not set or is empty; it must "
                f"hold the API key for {self.endpoint()} (for a server that needs no key, set "
                "api_key_env to null)"
            )
        return key

    def request_body(self, prompt: str) -> dict[str, Any]:
        """What is sent for `prompt`, vendor parameters included."""
        return {**self._request(prompt), **(self.extra_body or {})}

    def _request(self, prompt: str) -> dict[str, Any]:
        messages = [{"role": "user", "content": prompt}]
        if self.system_prompt is not None:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        request: dict[str, Any] = {"model": self.model, "messages": messages}
        sampling = {"max_tokens": self.max_tokens, "temperature": self.temperature}
        request.update((name, value) for name, value in sampling.items() if value is not None)
        if self.seed is not None:
            request["seed"] = self.seed
        return request

    def key(self, prompt: str) -> str:
        """Identifies a request by everything that decides its answer, and nothing secret."""
        material = {
            "base_url": self.endpoint(),
            "request": self._request(prompt),
            "extra_body": self.extra_body,
        }
        canonical = json.dumps(material, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    async def _complete(self, session: _Session, index: int, prompt: str) -> Answer:
        """The answer to `prompt`, with the requests it took: they are counted in `usage` with
        its tokens, when its direction is handed back (a failure's at once)."""
        request = self.request_body(prompt)
        attempt = 0
        try:
            while True:
                self.requests_sent += 1
                outcome = await self._attempt(session, request)
                if isinstance(outcome, Answer):
                    return replace(outcome, attempts=attempt + 1)
                reason = session.scrub(outcome.reason)
                if not outcome.retryable:
                    raise ChatRequestError(index, f"the server refused the request: {reason}")
                if attempt == self.max_retries:
                    raise ChatRequestError(
                        index, f"gave up after {attempt + 1} attempts; the last one: {reason}"
                    )
                wait = self._wait(attempt, outcome.retry_after)
                if wait is None:
                    raise ChatRequestError(
                        index,
                        f"{reason}; the server asks to wait {outcome.retry_after:.0f} s, more "
                        f"than the {MAX_RETRY_AFTER:.0f} s this translator waits",
                    )
                log.warning(
                    "prompt %d: %s; retry %d of %d in %.2f s",
                    index + 1,
                    reason,
                    attempt + 1,
                    self.max_retries,
                    wait,
                )
                await asyncio.sleep(wait)
                attempt += 1
        except ChatRequestError:
            self.count_requests(attempt + 1)
            raise

    def count_requests(self, attempts: int) -> None:
        """Add the requests that one prompt took (`attempts`) to `usage`."""
        self.usage.requests += attempts
        self.usage.retries += attempts - 1

    async def _attempt(self, session: _Session, request: dict[str, Any]) -> Answer | Failure:
        import httpx2
        import openai

        try:
            reply = await session.client.post(
                "/chat/completions",
                cast_to=httpx2.Response,
                body=request,
                options={"headers": session.headers},
            )
        except openai.APIConnectionError as error:  # timeouts included
            # Named by the first cause: the layers above it (the client's transport mapping
            # aiohttp's errors to httpx2's) call some dropped connections timeouts.
            cause = _first_cause(error)
            if isinstance(cause, TimeoutError):
                return Failure(f"no reply within {self.timeout:g} s")
            return Failure(f"connection failed ({type(cause).__name__}: {cause})")
        except openai.APIStatusError as error:
            return self._status_failure(error.response)
        return read_reply(reply.content)

    def _status_failure(self, response: Any) -> Failure:
        """What a reply that is not a 2xx means (an `httpx2.Response`)."""
        status: int = response.status_code
        if 300 <= status < 400:
            location = response.headers.get("Location", "nowhere")
            return Failure(
                f"HTTP {status}: {self.endpoint()} redirects to {location}; set base_url to the "
                "address requests end up at",
                retryable=False,
            )
        return Failure(
            f"HTTP {status}: {_error_message(response.content)}",
            retryable=status in RETRYABLE_STATUSES or status >= 500,
            retry_after=retry_after_seconds(response.headers),
        )

    def _wait(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retrying, or None if the server asks for too long a wait."""
        if retry_after is not None and retry_after > MAX_RETRY_AFTER:
            return None
        if retry_after is not None and retry_after > 0:
            return retry_after
        backoff = min(self.retry_backoff * 2**attempt, MAX_BACKOFF)
        # Jitter, so that requests rejected together do not all come back together.
        return backoff * (1 - 0.25 * random.random())

    def count(self, answer: Answer) -> None:
        """Add an answer's tokens to `usage`."""
        details = answer.usage.get("completion_tokens_details")
        counts = {
            "prompt_tokens": answer.usage.get("prompt_tokens"),
            "completion_tokens": answer.usage.get("completion_tokens"),
            "reasoning_tokens": details.get("reasoning_tokens")
            if isinstance(details, dict)
            else None,
        }
        for name, value in counts.items():
            if isinstance(value, int):
                setattr(self.usage, name, getattr(self.usage, name) + value)
        self.usage.truncated += answer.truncated


class _Stream:
    """The requests of a stream of batches over one session.

    The next batch is taken when fewer than `concurrency` requests are left unanswered, so the
    semaphore's places never wait for a batch to end. Identical prompts share one request (or
    one cached answer), within a batch and across batches. After a failure no new request is
    sent; those under way finish and are cached, the batches already whole are still handed
    back, and then the stream raises.
    """

    def __init__(
        self,
        translator: OpenAIChatTranslator,
        session: _Session,
        batches: Iterator[tuple[int, list[str]]],
    ) -> None:
        self.translator = translator
        self.session = session
        self.batches = batches
        # Finished batches, and None whenever the state changed (a batch ended, feeding ended).
        # (batch, answers, answers whose tokens and requests are to be counted, cache hits)
        self.events: asyncio.Queue[tuple[int, list[str], list[Answer], int] | None] = (
            asyncio.Queue()
        )
        self.received: dict[str, str] = {}
        # Answers whose tokens are counted when their batch is handed back, so that each
        # batch's (direction's) counts are its own although their requests overlap.
        self.uncounted: dict[str, Answer] = {}
        self.under_way: dict[str, asyncio.Task[str | None]] = {}
        self.room = asyncio.Event()
        self.open_batches = 0
        self.fed = False
        self.skipped = 0
        self.error: BaseException | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self._start(self._feed())

    def _start(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def stopped(self) -> bool:
        return bool(self.session.failures) or self.error is not None

    async def _feed(self) -> None:
        try:
            for index, prompts in self.batches:
                # Requests are registered here, before the next look at the room left.
                keys, answers, requests = self._send_batch(index, prompts)
                self.open_batches += 1
                self._start(self._batch(index, keys, answers, requests))
                while len(self.under_way) >= self.translator.concurrency and not self.stopped():
                    self.room.clear()
                    await self.room.wait()
                if self.stopped():
                    break
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # from the caller's batches, the cache, an interruption
            self.error = error
        finally:
            self.fed = True
            self.events.put_nowait(None)

    def _send_batch(
        self, index: int, prompts: list[str]
    ) -> tuple[list[str], dict[str, str], dict[str, asyncio.Task[str | None]]]:
        """A batch's keys, the answers known already, and the requests for the others."""
        keys = [self.translator.key(prompt) for prompt in prompts]
        known = self.translator.cache.answers() if self.translator.cache is not None else {}
        answers: dict[str, str] = {}
        for key in keys:
            answer = self.received.get(key, known.get(key))
            if answer is not None:
                answers[key] = answer
        hits = sum(key in answers for key in keys)
        pending: dict[str, int] = {}
        for position, key in enumerate(keys):
            if key not in answers:
                pending.setdefault(key, position)
        log.info(
            "%d prompts: %d answered from the cache, %d requests to send",
            len(prompts),
            hits,
            len(pending),
        )
        requests = {
            key: self._request(key, index, position, prompts[position])
            for key, position in pending.items()
        }
        return keys, answers, requests

    async def _batch(
        self,
        index: int,
        keys: list[str],
        answers: dict[str, str],
        requests: dict[str, asyncio.Task[str | None]],
    ) -> None:
        # Counted when the batch is handed back, as its tokens are.
        hits = sum(key in answers for key in keys)
        try:
            replies = await asyncio.gather(*requests.values())
            for key, reply in zip(requests, replies, strict=True):
                if reply is None:  # failed or not sent: the stream reports why
                    return
                answers[key] = reply
            if self.session.writer is not None:
                await self.session.writer.flush()
            tokens = [self.uncounted.pop(key) for key in set(keys) if key in self.uncounted]
            self.events.put_nowait((index, [answers[key] for key in keys], tokens, hits))
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a cache that cannot be written, an interruption
            self.error = self.error or error
        finally:
            self.open_batches -= 1
            self.events.put_nowait(None)

    def _request(
        self, key: str, batch: int, position: int, prompt: str
    ) -> asyncio.Task[str | None]:
        if key not in self.under_way:
            task = self._start(self._send(key, batch, position, prompt))
            self.under_way[key] = task
            task.add_done_callback(lambda _: self._done(key))
        return self.under_way[key]

    def _done(self, key: str) -> None:
        del self.under_way[key]
        self.room.set()

    async def _send(self, key: str, batch: int, position: int, prompt: str) -> str | None:
        session = self.session
        async with session.semaphore:
            if self.stopped():
                # The stream fails anyway: start no more paid requests. Those already under
                # way finish and are cached, so a rerun does not pay for them again.
                self.skipped += 1
                return None
            try:
                answer = await self.translator._complete(session, position, prompt)
            except ChatRequestError as error:
                error.batch = batch
                session.failures.append(error)
                return None
        # An endpoint may echo the key it was sent: it is kept, and written, nowhere.
        content = session.scrub(answer.content)
        self.received[key] = content
        self.uncounted[key] = answer
        if session.writer is not None:
            session.writer.add(key, content)
        return content

    async def next_finished(self) -> tuple[int, list[str]] | None:
        """The next whole batch; None when every batch has been handed back."""
        while True:
            event = await self.events.get()
            if event is not None:
                index, answers, tokens, hits = event
                for answer in tokens:
                    self.translator.count(answer)
                    self.translator.count_requests(answer.attempts)
                self.translator.usage.cache_hits += hits
                return index, answers
            if self.fed and self.open_batches == 0 and self.events.empty():
                break
        if self.error is not None:
            raise self.error
        if self.session.failures:
            failures = self.session.failures
            raise _summary(failures, unsent=len(failures) + self.skipped)
        return None

    async def close(self) -> None:
        """Stop what is still running (when the caller stopped early), close the session and
        write every answer received to the cache."""
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.session.client.close()
        if self.session.writer is not None:
            await self.session.writer.flush()


def _first_cause(error: BaseException) -> BaseException:
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def _error_message(payload: bytes) -> str:
    """The message of an error body: OpenAI's `{"error": {"message": …}}`, the older
    `{"message": …}` of some servers, or the start of whatever else came."""
    try:
        data = json.loads(payload)
    except ValueError:
        return excerpt(payload)
    error = data.get("error", data) if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return excerpt(payload)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bouquet-eval")
    except PackageNotFoundError:  # run from a checkout without installing
        return "unknown"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a reply asks for: `retry-after-ms`, or `Retry-After` in seconds or as a date."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                pass
    date = email.utils.parsedate_tz(headers.get("retry-after") or "")
    return None if date is None else email.utils.mktime_tz(date) - time.time()


def _summary(failures: list[ChatRequestError], unsent: int) -> ChatRequestError:
    first = failures[0]
    others = len(failures) - 1
    if not others and unsent == len(failures):
        return first
    return ChatRequestError(
        first.index,
        f"{first.detail} ({others} other prompts failed as well and "
        f"{unsent - len(failures)} were not sent; the answers received are kept)",
        first.batch,
    )
