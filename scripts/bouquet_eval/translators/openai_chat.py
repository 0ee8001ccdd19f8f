"""Translating through an OpenAI-compatible chat-completions API (OpenAI, vLLM, llama.cpp, …).

One chat request per prompt, `concurrency` at a time over kept-alive connections. With
`translate_batches` (many directions as one stream), the next direction's requests start as
soon as the previous direction's last ones leave room, so `concurrency` requests stay in flight
across direction boundaries instead of dwindling to the slowest answer of each direction. The
translation is the reply's raw `content`, reasoning included; callers remove it with
`reasoning.strip_reasoning`.

The wire protocol is spoken with aiohttp rather than through the `openai` SDK: the SDK spends
about 2 ms of CPU per request, which caps one event loop near 500 requests/s, below what 64
parallel requests of a 50 ms endpoint deliver; aiohttp spends about 0.3 ms
(benchmarks/openai_concurrency.py). The proxy the environment names is looked up once per
call (`_Route`), not per request as aiohttp's `trust_env` would at a cost in CPU greater than
the rest of the request's.

One retry loop covers every failure, so a prompt costs `max_retries` + 1 attempts at most.
Retried: 408, 409, 429, 5xx, timeouts, dropped connections and malformed replies (a 200 that is
not JSON, has no `choices` or has a null `content`), after `Retry-After`/`retry-after-ms` when
the server sends one, else after an exponential backoff. Any other status fails at once with
the server's message.

API key: read from the environment variable named by `api_key_env` when a request is about to
be sent, and never stored on the translator, written to the cache or left in a message (server
messages that quote it are scrubbed). `api_key_env=None` is for servers that need no key, such
as a local vLLM: an unset variable is otherwise an error, so that a forgotten key is caught
before any request rather than reported as 401s.

With `cache_dir`, every answer is written to disk as soon as it arrives (see `RequestCache`), so
a rerun after a crash or a kill sends only the requests that had not been answered.
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
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.secrets import REDACTED
from bouquet_eval.translators import BatchError

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

# Where requests go when neither `base_url` nor OPENAI_BASE_URL says otherwise, as for the
# official clients.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUSES = frozenset({408, 409, 429})  # and every status from 500 on
# A longer wait than this (e.g. a daily quota) is better reported than slept through.
MAX_RETRY_AFTER = 120.0
MAX_BACKOFF = 8.0
_REPLY_EXCERPT = 200


class MissingAPIKeyError(RuntimeError):
    pass


class ChatRequestError(RuntimeError):
    """A prompt that got no answer; `index` is its position in its batch (the list given to
    `translate`), `batch` the batch's position in a `translate_batches` stream."""

    def __init__(self, index: int, detail: str, batch: int = 0) -> None:
        super().__init__(f"prompt {index}: {detail}")
        self.index = index
        self.detail = detail
        self.batch = batch


@dataclass
class Usage:
    """Counts over every `translate` call of one translator."""

    requests: int = 0  # HTTP requests sent, retries included
    retries: int = 0
    cache_hits: int = 0  # prompts answered from the cache, without a request
    prompt_tokens: int = 0  # as the server reports them, for answers received (not cache hits)
    completion_tokens: int = 0
    truncated: int = 0  # answers cut at the token limit (finish_reason "length")


@dataclass(frozen=True)
class _Route:
    """How requests reach an endpoint: directly, or through the proxy the environment names
    (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY, in either case, as curl reads them).

    Proxy credentials (`http://user:password@proxy:3128`) go where HTTP puts them: on each
    request for a plain-http endpoint, which the proxy forwards; on the CONNECT that opens the
    tunnel for an https one, so that they never reach the endpoint itself.
    """

    proxy: str | None = None
    connect_headers: Mapping[str, str] | None = None
    request_headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_environment(cls, endpoint: str) -> _Route:
        import urllib.parse
        import urllib.request

        import aiohttp

        target = urllib.parse.urlsplit(endpoint)
        proxies = urllib.request.getproxies()
        proxy = proxies.get(target.scheme) or proxies.get("all")
        if not proxy or urllib.request.proxy_bypass(target.hostname or ""):
            return cls()
        parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if parts.username is None:
            return cls(parts.geturl())
        address = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        credentials = {
            "Proxy-Authorization": aiohttp.encode_basic_auth(
                urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
            )
        }
        if target.scheme == "https":
            return cls(address, connect_headers=credentials)
        return cls(address, request_headers=credentials)


@dataclass(frozen=True)
class _Answer:
    content: str
    usage: Mapping[str, Any]
    truncated: bool


@dataclass(frozen=True)
class _Failure:
    reason: str
    retryable: bool = True
    retry_after: float | None = None


@dataclass
class _Session:
    """What the requests of one stream (or `translate` call) share."""

    client: aiohttp.ClientSession
    secret: str | None
    url: str
    headers: Mapping[str, str]
    route: _Route
    semaphore: asyncio.Semaphore
    writer: _CacheWriter | None
    failures: list[ChatRequestError] = field(default_factory=list)

    def scrub(self, text: str) -> str:
        return text.replace(self.secret, REDACTED) if self.secret else text


class _CacheWriter:
    """Appends answers to a `RequestCache` from a thread, so that the event loop never waits for
    an fsync (milliseconds each on common disks); answers that arrive while one batch is being
    written go together into the next, so an fsync per answer does not cap throughput either.
    """

    def __init__(self, cache: RequestCache) -> None:
        self._cache = cache
        self._queued: list[tuple[str, str]] = []
        self._writing: asyncio.Task[None] | None = None

    def add(self, key: str, content: str) -> None:
        self._queued.append((key, content))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_queued(self._writing))

    async def _write_queued(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await previous  # a failed write fails every later one, and so `flush`
        while self._queued:
            batch, self._queued = self._queued, []
            await asyncio.to_thread(self._cache.append, batch)

    async def flush(self) -> None:
        """Wait until every answer added is on disk; raises what writing raised."""
        if self._writing is not None:
            # Shielded: a waiter that is cancelled (a batch, when a stream is closed early)
            # must not cancel the writing that the cache and the other waiters depend on.
            await asyncio.shield(self._writing)


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
    ) -> None:
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
        self.cache = RequestCache(Path(cache_dir)) if cache_dir is not None else None
        self.usage = Usage()
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

    def translate_batches(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        """See `bouquet_eval.translators.BatchTranslator`; one session for every batch."""
        try:
            yield from self._stream(batches)
        except ChatRequestError as error:
            raise BatchError(error.batch, str(error)) from error

    def _stream(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
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

    async def _open(self, batches: Iterator[tuple[int, list[str]]]) -> _Stream:
        import aiohttp

        secret = self._api_key()
        route = _Route.from_environment(self.endpoint())
        # Given with each request, not as the session's defaults: aiohttp copies those into
        # the headers for a proxy, where it would send the key as Proxy-Authorization.
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"bouquet-eval/{_version()}",
            **route.request_headers,
        }
        if secret is not None:
            headers["Authorization"] = f"Bearer {secret}"
        session = _Session(
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.concurrency),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ),
            secret,
            f"{self.endpoint()}/chat/completions",
            headers,
            route,
            asyncio.Semaphore(self.concurrency),
            _CacheWriter(self.cache) if self.cache is not None else None,
        )
        return _Stream(self, session, batches)

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

    def _key(self, prompt: str) -> str:
        """Identifies a request by everything that decides its answer, and nothing secret."""
        material = {
            "base_url": self.endpoint(),
            "request": self._request(prompt),
            "extra_body": self.extra_body,
        }
        canonical = json.dumps(material, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    async def _complete(self, session: _Session, index: int, prompt: str) -> str:
        request = self._request(prompt)
        attempt = 0
        while True:
            self.usage.requests += 1
            outcome = await self._attempt(session, request)
            if isinstance(outcome, _Answer):
                self._count(outcome)
                return outcome.content
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
                    f"{reason}; the server asks to wait {outcome.retry_after:.0f} s, more than "
                    f"the {MAX_RETRY_AFTER:.0f} s this translator waits",
                )
            log.warning(
                "prompt %d: %s; retry %d of %d in %.2f s",
                index,
                reason,
                attempt + 1,
                self.max_retries,
                wait,
            )
            await asyncio.sleep(wait)
            attempt += 1
            self.usage.retries += 1

    async def _attempt(self, session: _Session, request: dict[str, Any]) -> _Answer | _Failure:
        import aiohttp

        body = json.dumps({**request, **(self.extra_body or {})}, ensure_ascii=False).encode()
        try:
            async with session.client.post(
                session.url,
                data=body,
                headers=session.headers,
                proxy=session.route.proxy,
                proxy_headers=session.route.connect_headers,
                # A redirected POST is resent, or turned into a GET, depending on the status:
                # a base_url that redirects is better corrected than followed on every request.
                allow_redirects=False,
            ) as response:
                payload = await response.read()
        except TimeoutError:
            return _Failure(f"no reply within {self.timeout:g} s")
        except aiohttp.ClientError as error:
            return _Failure(f"connection failed ({type(error).__name__}: {error})")
        if response.status >= 400:
            return _status_failure(response.status, payload, response.headers)
        if response.status >= 300:
            location = response.headers.get("Location", "nowhere")
            return _Failure(
                f"HTTP {response.status}: {self.endpoint()} redirects to {location}; set "
                "base_url to the address requests end up at",
                retryable=False,
            )
        return _read_reply(payload)

    def _wait(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retrying, or None if the server asks for too long a wait."""
        if retry_after is not None and retry_after > MAX_RETRY_AFTER:
            return None
        if retry_after is not None and retry_after > 0:
            return retry_after
        backoff = min(self.retry_backoff * 2**attempt, MAX_BACKOFF)
        # Jitter, so that requests rejected together do not all come back together.
        return backoff * (1 - 0.25 * random.random())

    def _count(self, answer: _Answer) -> None:
        for name in ("prompt_tokens", "completion_tokens"):
            value = answer.usage.get(name)
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
        self.events: asyncio.Queue[tuple[int, list[str]] | None] = asyncio.Queue()
        self.received: dict[str, str] = {}
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
        keys = [self.translator._key(prompt) for prompt in prompts]
        known = self.translator.cache.answers() if self.translator.cache is not None else {}
        answers = {}
        for key in keys:
            if key in self.received or key in known:
                answers[key] = self.received.get(key, known.get(key))
        hits = sum(key in answers for key in keys)
        self.translator.usage.cache_hits += hits
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
        try:
            replies = await asyncio.gather(*requests.values())
            if any(reply is None for reply in replies):
                return
            answers.update(zip(requests, replies, strict=True))
            if self.session.writer is not None:
                await self.session.writer.flush()
            self.events.put_nowait((index, [answers[key] for key in keys]))
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
                content = await self.translator._complete(session, position, prompt)
            except ChatRequestError as error:
                error.batch = batch
                session.failures.append(error)
                return None
        self.received[key] = content
        if session.writer is not None:
            session.writer.add(key, content)
        return content

    async def next_finished(self) -> tuple[int, list[str]] | None:
        """The next whole batch; None when every batch has been handed back."""
        while True:
            event = await self.events.get()
            if event is not None:
                return event
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


def _read_reply(payload: bytes) -> _Answer | _Failure:
    """The answer in a 2xx's body, or what is wrong with the body."""
    try:
        data = json.loads(payload)
    except ValueError:  # also a UnicodeDecodeError
        return _Failure(f"the reply is not JSON: {_excerpt(payload)!r}")
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        return _Failure(f"the reply has no choices: {_excerpt(payload)!r}")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    if not isinstance(content, str):
        reasoning = any(message.get(name) for name in ("reasoning", "reasoning_content"))
        hint = " (it has reasoning only: is max_tokens too small?)" if reasoning else ""
        return _Failure(f"the reply's content is null{hint}")
    usage = data.get("usage")
    return _Answer(
        content, usage if isinstance(usage, dict) else {}, choice.get("finish_reason") == "length"
    )


def _status_failure(status: int, payload: bytes, headers: Mapping[str, str]) -> _Failure:
    return _Failure(
        f"HTTP {status}: {_error_message(payload)}",
        retryable=status in RETRYABLE_STATUSES or status >= 500,
        retry_after=retry_after_seconds(headers),
    )


def _error_message(payload: bytes) -> str:
    """The message of an error body: OpenAI's `{"error": {"message": …}}`, the older
    `{"message": …}` of some servers, or the start of whatever else came."""
    try:
        data = json.loads(payload)
    except ValueError:
        return _excerpt(payload)
    error = data.get("error", data) if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return _excerpt(payload)


def _excerpt(payload: bytes) -> str:
    return payload[:_REPLY_EXCERPT].decode(errors="replace")


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


class RequestCache:
    """Answers of completed requests, in append-only JSON Lines files in `directory`.

    Each translator appends to a file of its own, named at random, so that jobs sharing the
    directory never interleave their writes, even on file systems where appends from several
    processes are not atomic. Records are written with one `write` followed by `fsync`, as
    soon as their answers arrive; a crash can therefore only tear the last line of a file, and
    lines that do not parse are skipped on loading. A record holds the request's key (a hash)
    and the answer, nothing secret. Every record is read into memory on first use, so a
    directory per model (or per run) keeps that small.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._answers: dict[str, str] | None = None
        self._path: Path | None = None

    def answers(self) -> dict[str, str]:
        """Key -> answer, read from disk on first use and kept up to date by `append`."""
        if self._answers is None:
            self._answers = self._load()
        return self._answers

    def append(self, records: list[tuple[str, str]]) -> None:
        """Write (key, answer) pairs durably: blocks for an fsync."""
        lines = "".join(
            json.dumps({"key": key, "content": content}, ensure_ascii=False) + "\n"
            for key, content in records
        )
        if self._path is None:
            self._path = self._create_file()
        descriptor = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        try:
            remaining = memoryview(lines.encode())
            while remaining:
                remaining = remaining[os.write(descriptor, remaining) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        self.answers().update(records)

    def _create_file(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{uuid.uuid4().hex}.jsonl"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        # The new name must be on disk too, or a crash could lose the file with its records.
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return path

    def _load(self) -> dict[str, str]:
        answers: dict[str, str] = {}
        skipped = 0
        for path in sorted(self.directory.glob("*.jsonl")):
            for line in path.read_bytes().splitlines():
                record = _parse_record(line)
                if record is not None:
                    answers[record[0]] = record[1]
                elif line.strip():
                    skipped += 1
        if skipped:
            log.warning(
                "%s: skipped %d unreadable records (torn by a crash?)", self.directory, skipped
            )
        return answers


def _parse_record(line: bytes) -> tuple[str, str] | None:
    try:
        record = json.loads(line)
    except ValueError:  # also a UnicodeDecodeError, when a write stopped inside a character
        return None
    if not isinstance(record, dict):
        return None
    key, content = record.get("key"), record.get("content")
    return (key, content) if isinstance(key, str) and isinstance(content, str) else None
