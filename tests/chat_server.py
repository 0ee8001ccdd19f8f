"""A local chat-completions server that misbehaves on cue, for tests and benchmarks.

    with ChatServer() as server:
        server.script(rate_limit(retry_after_ms=1), answer())
        ... OpenAIChatTranslator(model="m", base_url=server.url, ...) ...
        assert len(server.chat_requests) == 2

Each chat request takes the next fault from the script, or `server.default` once the script is
empty; a fault is a function that writes (or withholds) the reply. The default answer is
"T:" + the last user message, so results can be checked without a model. Every request is
recorded with its headers and body. Requests addressed to it as an HTTP proxy (a whole URL in
the request line) are answered as well, so that it can stand in for a proxy too; CONNECT, to
open a tunnel, is recorded and refused. Leaving the `with` block releases requests held by `hang`
or `answer(delay=…)`, closes every connection and joins every handler thread. It speaks the Files
and Batches API too (`server.batches`, see tests/batch_api.py).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .batch_api import BatchAPI

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
FILES_PATH = "/v1/files"
BATCHES_PATH = "/v1/batches"


@dataclass
class Request:
    method: str
    # The request line's target: a path, or the whole URL when the server acts as a proxy.
    target: str
    headers: dict[str, str]
    body: Any
    # Whether a completion (a 200 with choices) was written back: what a paid API bills.
    answered: bool = False

    @property
    def prompt(self) -> str | None:
        """The last user message."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        users = [message.get("content") for message in messages if message.get("role") == "user"]
        return users[-1] if users else None

    @property
    def path(self) -> str:
        return urllib.parse.urlsplit(self.target).path


def default_answer(request: Request) -> str:
    return f"T:{request.prompt}"


Fault = Callable[["_Handler", Request], None]


def answer(
    *,
    content: str | None = None,
    prefix: str = "",
    delay: float = 0.0,
    finish_reason: str = "stop",
    reasoning_tokens: int | None = None,
    echo_authorization: bool = False,
    **message_fields: Any,
) -> Fault:
    """A completion: `prefix` + (`content` or the default answer), after `delay` seconds.

    `message_fields` go into the message beside `content`, e.g. `reasoning_content="…"`;
    `reasoning_tokens`, into `usage.completion_tokens_details` (and the completion's count);
    `echo_authorization` ends the answer with the request's credentials, as a model that
    repeats its prompt's context might.
    """

    def reply(handler: _Handler, request: Request) -> None:
        if delay and handler.stopping(delay):
            handler.drop()
            return
        text = prefix + (default_answer(request) if content is None else content)
        if echo_authorization:
            text += f" [{request.headers.get('authorization', '')}]"
        message = {"role": "assistant", "content": text, **message_fields}
        body = completion_body(request, message, finish_reason)
        if reasoning_tokens is not None:
            body["usage"]["completion_tokens"] += reasoning_tokens
            body["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        handler.send_json(200, body)
        request.answered = True

    return reply


def null_content(**message_fields: Any) -> Fault:
    def reply(handler: _Handler, request: Request) -> None:
        message = {"role": "assistant", "content": None, **message_fields}
        handler.send_json(200, completion_body(request, message))

    return reply


def no_choices() -> Fault:
    def reply(handler: _Handler, request: Request) -> None:
        body = completion_body(request, {})
        del body["choices"]
        handler.send_json(200, body)

    return reply


def not_json(content_type: str = "text/html") -> Fault:
    """A 200 whose body is not JSON, as from a proxy's error page."""

    def reply(handler: _Handler, request: Request) -> None:
        handler.send_bytes(200, b"<html>upstream hiccup</html>", content_type)

    return reply


def error(
    status: int,
    message: str = "injected failure",
    *,
    headers: Mapping[str, str] | None = None,
    echo_authorization: bool = False,
) -> Fault:
    """An OpenAI-style error body; `echo_authorization` quotes the request's credentials in it,
    as some servers do, to check that clients keep them out of their own messages."""

    def reply(handler: _Handler, request: Request) -> None:
        text = message
        if echo_authorization:
            text += f" (got {request.headers.get('authorization', '')!r})"
        body = {"error": {"message": text, "type": "injected", "code": status}}
        handler.send_json(status, body, headers)

    return reply


def rate_limit(*, retry_after: str | None = None, retry_after_ms: str | None = None) -> Fault:
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    if retry_after_ms is not None:
        headers["retry-after-ms"] = retry_after_ms
    return error(429, "rate limited", headers=headers)


def drop() -> Fault:
    """Close the connection without a reply."""

    def reply(handler: _Handler, request: Request) -> None:
        handler.drop()

    return reply


def hang() -> Fault:
    """Never reply; the connection is closed when the server stops."""

    def reply(handler: _Handler, request: Request) -> None:
        handler.stopping(None)
        handler.drop()

    return reply


def completion_body(
    request: Request, message: dict[str, Any], finish_reason: str = "stop"
) -> dict[str, Any]:
    body = request.body if isinstance(request.body, dict) else {}
    messages = body.get("messages", [])
    prompt_words = sum(len(str(item.get("content", "")).split()) for item in messages)
    content = message.get("content")
    completion_words = len(content.split()) if isinstance(content, str) else 0
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": completion_words,
            "total_tokens": prompt_words + completion_words,
        },
    }


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections alive, as real servers do; every reply sets Content-Length.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm the second one waits for
    # the client's delayed ACK, adding ~40 ms to every reply.
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, open_=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the request record instead."""

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path.rstrip("/")
        if path.startswith((FILES_PATH, BATCHES_PATH)):
            self.batch_get(path)
            return
        if path != MODELS_PATH:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        model = {"id": self.server.owner.model, "object": "model", "owned_by": "test"}
        self.send_json(200, {"object": "list", "data": [model]})

    def do_CONNECT(self) -> None:
        """Refuse to open a tunnel, after recording what the client sent to open it."""
        self.server.owner.record(Request("CONNECT", self.path, self.lowercase_headers(), None))
        self.send_json(502, {"error": {"message": "this proxy opens no tunnels"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        request = Request("POST", self.path, self.lowercase_headers(), body)
        self.server.owner.record(request)
        if request.path.rstrip("/") in (FILES_PATH, BATCHES_PATH):
            self.batch_post(request.path.rstrip("/"), raw, body)
            return
        if request.path.rstrip("/") != CHAT_PATH:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if body is None:
            self.send_json(400, {"error": {"message": "the request body is not JSON"}})
            return
        latency = self.server.owner.latency
        if latency and self.stopping(latency):
            self.drop()
            return
        self.server.owner.next_fault()(self, request)

    def batch_get(self, path: str) -> None:
        api = self.server.owner.batches
        parts = path.split("/")  # "", "v1", "files" or "batches", id, "content"
        if path == BATCHES_PATH:
            self.send_json(200, api.listing())
            return
        if parts[2] == "files" and len(parts) == 5 and parts[4] == "content":
            content = api.content(parts[3])
            if content is not None:
                self.send_bytes(200, content, "application/octet-stream")
                return
        if parts[2] == "batches" and len(parts) == 4:
            if api.drop_next_retrieve:
                api.drop_next_retrieve = False
                self.drop()
                return
            batch = api.retrieve(parts[3])
            if batch is not None:
                self.send_json(200, batch)
                return
        self.send_json(404, {"error": {"message": f"no such object {path}"}})

    def batch_post(self, path: str, raw: bytes, body: Any) -> None:
        api = self.server.owner.batches
        if path == FILES_PATH:
            self.send_json(200, api.upload(self.headers.get("Content-Type", ""), raw))
            return
        batch = api.create(body if isinstance(body, dict) else {})
        if isinstance(batch, str):
            self.send_json(400, {"error": {"message": batch}})
        elif api.hang_creates:
            self.stopping(None)
            self.drop()
        elif api.drop_next_create:
            api.drop_next_create = False
            self.drop()
        else:
            self.send_json(200, batch)

    def lowercase_headers(self) -> dict[str, str]:
        return {key.lower(): value for key, value in self.headers.items()}

    def stopping(self, seconds: float | None) -> bool:
        """Wait `seconds` (None: until the server stops); True if the server is stopping."""
        return self.server.owner.stopped.wait(seconds)

    def send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self.send_bytes(status, json.dumps(body).encode(), "application/json", headers)

    def send_bytes(
        self,
        status: int,
        payload: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def drop(self) -> None:
        self.close_connection = True
        _shut(self.connection)


def _shut(connection: socket.socket) -> None:
    # OSError: the other side has closed it already.
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 makes bursts of new connections wait for SYN retransmits.
    request_queue_size = 256
    # server_close() joins only the handler threads that are not daemons.
    daemon_threads = False

    def __init__(self, owner: ChatServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def track(self, connection: socket.socket, *, open_: bool) -> None:
        with self._connections_lock:
            if not open_:
                self._connections.discard(connection)
            elif self.owner.stopped.is_set():
                _shut(connection)  # accepted while stopping: nobody would unblock it later
            else:
                self._connections.add(connection)

    def close_connections(self) -> None:
        """Unblock handlers waiting on idle keep-alive connections, so that they can be joined."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            _shut(connection)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or are killed reset connections: expected here, so quiet.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass(eq=False)
class ChatServer:
    """See the module docstring. `latency` delays every chat reply, for benchmarks."""

    latency: float = 0.0
    model: str = "test-model"
    default: Fault = field(default_factory=answer)
    batches: BatchAPI = field(default_factory=BatchAPI, init=False)
    stopped: threading.Event = field(default_factory=threading.Event, init=False)
    _faults: deque[Fault] = field(default_factory=deque, init=False)
    _requests: list[Request] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _server: _Server | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __enter__(self) -> ChatServer:
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self.stopped.set()
        self._server.shutdown()
        self._thread.join()
        self._server.close_connections()
        self._server.server_close()  # joins the handler threads
        self._server = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not running; use it in a `with` block")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, *faults: Fault) -> None:
        """Queue faults for the next chat requests, in arrival order."""
        with self._lock:
            self._faults.extend(faults)

    def next_fault(self) -> Fault:
        with self._lock:
            return self._faults.popleft() if self._faults else self.default

    def record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[Request]:
        return [request for request in self.requests if request.path.rstrip("/") == CHAT_PATH]

    def answered_prompts(self) -> Iterator[str | None]:
        return (request.prompt for request in self.chat_requests if request.answered)
