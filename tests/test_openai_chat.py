"""The chat-completions translator against the fault-injecting local server."""

from __future__ import annotations

import email.utils
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bouquet_eval.data.dataset import Direction, resolve_dataset
from bouquet_eval.translation.translate import translate_directions
from bouquet_eval.translation.watchdog import TranslatorStalled
from bouquet_eval.translators import BatchError, BatchTranslator, Translator
from bouquet_eval.translators.openai_chat import (
    ChatRequestError,
    MissingAPIKeyError,
    OpenAIChatTranslator,
    RequestCache,
    retry_after_seconds,
)
from bouquet_eval.translators.prompt import build_prompt
from bouquet_eval.translators.reasoning import strip_reasoning

from .chat_server import (
    ChatServer,
    Fault,
    answer,
    drop,
    error,
    hang,
    no_choices,
    not_json,
    null_content,
    rate_limit,
)
from .conftest import SAMPLE, patience, python_path, wait_until

KEY_VARIABLE = "BOUQUET_TEST_API_KEY"
KEY = "sk-test-7f3a9c2e5b1d4068"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


def make(server: ChatServer, **settings: Any) -> OpenAIChatTranslator:
    """A translator for `server` whose retries take milliseconds."""
    defaults = {
        "model": "test-model",
        "base_url": server.url,
        "api_key_env": KEY_VARIABLE,
        "retry_backoff": 0.001,
        "timeout": 5.0,
    }
    return OpenAIChatTranslator(**{**defaults, **settings})


# strip_reasoning

MULTI_LINE = "Première ligne.\nDeuxième ligne.\n\nTroisième, après un blanc.\n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<think>The user wants French.</think>\n\nBonjour.", "Bonjour."),
        (f"<think>\nstep 1\nstep 2\n</think>\n\n{MULTI_LINE}", MULTI_LINE),
        ("<think>\n\n</think>\n\nHallo.", "Hallo."),
        ("  \n<THINK>case</THINK> Hola.", "Hola."),
        ("<think>a</think>\n<think>b</think>\nCiao.", "Ciao."),
        ("<think>cut short by max_tok", ""),
        ("<thinking>plan</thinking>\nDobrý den.", "Dobrý den."),
        ("<reasoning>r</reasoning>Salut.", "Salut."),
        ("<reasoning>unterminated\nstill thinking", ""),
        ("reasoning whose opening tag was in the prompt\n</think>\n\nGuten Tag.", "Guten Tag."),
        ("reasoning\n</THINK>\nGuten Abend.", "Guten Abend."),
        ("<|START_THINKING|>plan<|END_THINKING|>\nMerhaba.", "Merhaba."),
        ("<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>Hej.<|END_RESPONSE|>", "Hej."),
        ("<|START_THINKING|>never ends", ""),
        (
            "<|channel|>analysis<|message|>Translate it.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Bonjour.<|return|>",
            "Bonjour.",
        ),
        (
            "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final "
            f"<|constrain|>text<|message|>{MULTI_LINE}<|end|>",
            MULTI_LINE,
        ),
        ("<|start|>assistant<|channel|>analysis<|message|>We need to transl", ""),
        ("<|channel|>analysis<|message|>a<|end|><|channel|>final<|message|>Olá.", "Olá."),
    ],
)
def test_strip_reasoning_removes_reasoning(raw: str, expected: str) -> None:
    assert strip_reasoning(raw) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Bonjour.",
        MULTI_LINE,
        "  leading spaces and a trailing newline\n",
        "I think so.",
        "Think before you speak.",
        "<thinker> is not a tag we know",
        "Le mot <think> apparaît au milieu.",
        "We <think> a lot </think> here, in the middle.",
        "An answer that says </reasoning> somewhere.",
        "channel 4, final message",
    ],
)
def test_strip_reasoning_leaves_answers_alone(text: str) -> None:
    assert strip_reasoning(text) == text


# Requests and retries


def test_is_a_translator(server: ChatServer) -> None:
    assert isinstance(make(server), Translator)


def test_answers_come_back_in_prompt_order(server: ChatServer) -> None:
    prompts = [f"sentence {i}" for i in range(8)]
    translator = make(server, concurrency=8)
    translator.translate(["warm-up"])  # the client's import, outside the timing
    # Each request is answered once all eight have arrived (a client sending one at a time
    # never gets an answer), the first to arrive last, so replies come back in reverse.
    together = threading.Barrier(len(prompts), timeout=patience(30))

    def when_all_are_in(handler: Any, request: Any) -> None:
        together.wait()
        answer(delay=0.05 * (8 - int(str(request.prompt).split()[-1])))(handler, request)

    server.script(*[when_all_are_in] * len(prompts))
    assert translator.translate(prompts) == [f"T:{prompt}" for prompt in prompts]
    assert sorted(str(request.prompt) for request in server.chat_requests[1:]) == sorted(prompts)
    assert translator.usage.requests == 9


def test_settings_are_forwarded(server: ChatServer) -> None:
    extra_body = {"top_k": 5, "chat_template_kwargs": {"enable_thinking": False}}
    translator = make(
        server,
        max_tokens=7,
        temperature=0.3,
        seed=11,
        system_prompt="Translate tersely.",
        extra_body=extra_body,
    )
    assert translator.translate(["Hello."]) == ["T:Hello."]
    (request,) = server.chat_requests
    assert request.body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "Translate tersely."},
            {"role": "user", "content": "Hello."},
        ],
        "max_tokens": 7,
        "temperature": 0.3,
        "seed": 11,
        **extra_body,
    }
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_defaults_send_no_token_limit_and_no_system_message(server: ChatServer) -> None:
    make(server).translate(["Hello."])
    (request,) = server.chat_requests
    assert request.body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "Hello."}],
        "temperature": 0.0,
        "seed": 0,
    }


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(rate_limit(retry_after_ms="5"), id="429-retry-after-ms"),
        pytest.param(rate_limit(retry_after="0.01"), id="429-retry-after"),
        pytest.param(rate_limit(), id="429-bare"),
        pytest.param(error(408), id="408"),
        pytest.param(error(409), id="409"),
        pytest.param(error(500), id="500"),
        pytest.param(error(502), id="502"),
        pytest.param(error(503), id="503"),
        # Beyond the 1 s timeout below, which leaves a loaded machine time for real replies.
        pytest.param(answer(delay=10.0), id="timeout"),
        pytest.param(drop(), id="dropped-connection"),
        pytest.param(not_json(), id="html-200"),
        pytest.param(not_json("application/json"), id="invalid-json-200"),
        pytest.param(no_choices(), id="no-choices"),
        pytest.param(null_content(), id="null-content"),
    ],
)
def test_a_passing_fault_is_retried(server: ChatServer, fault: Fault) -> None:
    server.script(fault)
    translator = make(server, timeout=1.0)
    assert translator.translate(["Hello."]) == ["T:Hello."]
    requests = server.chat_requests
    assert [request.prompt for request in requests] == ["Hello.", "Hello."]
    assert (translator.usage.requests, translator.usage.retries) == (2, 1)


@pytest.mark.parametrize(
    ("headers", "at_least"),
    [({"retry-after-ms": "300"}, 0.3), ({"Retry-After": "0.3"}, 0.3)],
)
def test_retry_waits_as_the_server_asks(
    server: ChatServer, headers: dict[str, str], at_least: float
) -> None:
    server.script(error(429, headers=headers))
    # Ignoring the header, it would back off for the longest it does: 6 to 8 s.
    translator = make(server, retry_backoff=8.0)
    started = time.monotonic()
    translator.translate(["Hello."])
    assert at_least <= time.monotonic() - started < min(patience(3.0), 6.0)


def test_retry_after_too_long_fails_at_once(server: ChatServer) -> None:
    server.script(rate_limit(retry_after="3600"))
    with pytest.raises(ChatRequestError, match=r"prompt 1: HTTP 429: .*wait 3600 s"):
        make(server).translate(["Hello."])
    assert len(server.chat_requests) == 1


def test_retry_after_parsing() -> None:
    in_30_s = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert 28 < (retry_after_seconds({"retry-after": in_30_s}) or 0) <= 30
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_client_error_fails_at_once(server: ChatServer, status: int) -> None:
    server.script(error(status, "max_tokens is too large"))
    with pytest.raises(ChatRequestError) as raised:
        make(server).translate(["Hello."])
    assert str(raised.value) == (
        f"prompt 1: the server refused the request: HTTP {status}: max_tokens is too large"
    )
    assert raised.value.index == 0
    assert len(server.chat_requests) == 1


def test_a_redirect_fails_at_once_naming_where_it_points(server: ChatServer) -> None:
    elsewhere = "https://api.example.invalid/v1/chat/completions"
    server.script(error(308, "moved", headers={"Location": elsewhere}))
    with pytest.raises(ChatRequestError, match=f"HTTP 308: .* redirects to {elsewhere}; set"):
        make(server).translate(["Hello."])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        pytest.param(
            error(503, "overloaded", headers={"retry-after-ms": "1"}),
            "HTTP 503: overloaded",
            id="503",
        ),
        pytest.param(drop(), "connection failed (ServerDisconnectedError", id="dropped-connection"),
        pytest.param(
            not_json(), "the reply is not JSON: '<html>upstream hiccup</html>'", id="not-json"
        ),
        pytest.param(no_choices(), "the reply has no choices", id="no-choices"),
        pytest.param(null_content(), "the reply's content is null", id="null-content"),
        pytest.param(
            null_content(reasoning="spent every token thinking"),
            "the reply's content is null (it has reasoning only: is max_tokens too small?)",
            id="reasoning-only",
        ),
    ],
)
def test_a_lasting_fault_fails_after_the_bounded_attempts(
    server: ChatServer, fault: Fault, reason: str
) -> None:
    server.script(answer())
    server.default = fault
    with pytest.raises(ChatRequestError) as raised:
        # One at a time, so that the first prompt takes the scripted answer, the second the fault.
        make(server, max_retries=3, concurrency=1).translate(["first", "second"])
    assert raised.value.index == 1
    assert str(raised.value).startswith("prompt 2: gave up after 4 attempts; the last one: ")
    assert reason in str(raised.value)
    assert [request.prompt for request in server.chat_requests] == ["first"] + ["second"] * 4


def test_empty_content_is_an_answer(server: ChatServer) -> None:
    server.script(answer(content=""))
    assert make(server).translate(["Hello."]) == [""]
    assert len(server.chat_requests) == 1


def test_after_a_failure_no_new_request_is_started(server: ChatServer) -> None:
    server.default = error(400, "bad request")
    with pytest.raises(ChatRequestError, match=r"0 other prompts failed as well and 4 were not"):
        make(server, concurrency=1).translate([f"p{i}" for i in range(5)])
    assert len(server.chat_requests) == 1


def test_usage_counts_tokens_and_truncations(server: ChatServer) -> None:
    server.script(answer(reasoning_tokens=7), answer(finish_reason="length"))
    translator = make(server, system_prompt="be brief", concurrency=1)
    translator.translate(["one two three", "four"])
    # The server counts words: prompts are 2 + 3 and 2 + 1, answers "T:one two three", "T:four",
    # the first after 7 tokens of reasoning.
    assert translator.usage.prompt_tokens == 8
    assert translator.usage.completion_tokens == 4 + 7
    assert translator.usage.reasoning_tokens == 7
    assert translator.usage.truncated == 1
    assert (translator.usage.requests, translator.usage.retries) == (2, 0)


@pytest.mark.parametrize(
    "fault",
    [
        answer(reasoning_content="secret plan"),
        answer(reasoning="secret plan"),
        answer(prefix="<think>secret plan</think>\n\n"),
    ],
    ids=["reasoning_content", "reasoning", "inline-think"],
)
def test_reasoning_is_never_the_translation(server: ChatServer, fault: Fault) -> None:
    server.script(fault)
    (raw,) = make(server).translate(["Hello."])
    assert strip_reasoning(raw) == "T:Hello."
    assert raw.endswith("T:Hello.")


# Cache


def test_a_rerun_sends_only_the_missing_requests(server: ChatServer, tmp_path: Path) -> None:
    first = make(server, cache_dir=tmp_path)
    assert first.translate(["a", "b"]) == ["T:a", "T:b"]
    second = make(server, cache_dir=tmp_path)
    assert second.translate(["b", "c", "a"]) == ["T:b", "T:c", "T:a"]
    assert [request.prompt for request in server.chat_requests][2:] == ["c"]
    assert (second.usage.cache_hits, second.usage.requests) == (2, 1)


@pytest.mark.parametrize(
    "change",
    [
        lambda url: {"model": "other-model"},
        lambda url: {"system_prompt": "Be formal."},
        lambda url: {"max_tokens": 64},
        lambda url: {"temperature": 0.7},
        lambda url: {"seed": 1},
        lambda url: {"extra_body": {"top_k": 1}},
        lambda url: {"base_url": url.replace("127.0.0.1", "localhost")},
    ],
    ids=["model", "system_prompt", "max_tokens", "temperature", "seed", "extra_body", "base_url"],
)
def test_the_cache_key_covers_what_decides_the_answer(
    server: ChatServer, tmp_path: Path, change: Callable[[str], dict[str, Any]]
) -> None:
    make(server, cache_dir=tmp_path).translate(["a"])
    make(server, cache_dir=tmp_path, **change(server.url)).translate(["a"])
    assert len(server.chat_requests) == 2
    # What does not change the answer does not miss the cache.
    make(server, cache_dir=tmp_path, timeout=9.0, concurrency=3, max_retries=1).translate(["a"])
    assert len(server.chat_requests) == 2


def test_identical_prompts_share_one_request(server: ChatServer) -> None:
    assert make(server).translate(["a", "b", "a"]) == ["T:a", "T:b", "T:a"]
    assert sorted(str(request.prompt) for request in server.chat_requests) == ["a", "b"]


@pytest.mark.parametrize("tail", [-7, b'{"key": "\xc3'], ids=["truncated", "split-character"])
def test_a_torn_record_is_ignored(
    server: ChatServer, tmp_path: Path, tail: int | bytes, caplog: pytest.LogCaptureFixture
) -> None:
    make(server, cache_dir=tmp_path).translate(["a", "b", "c"])
    (path,) = tmp_path.glob("*.jsonl")
    data = path.read_bytes()
    path.write_bytes(data[:tail] if isinstance(tail, int) else data + tail)
    translator = make(server, cache_dir=tmp_path)
    assert translator.translate(["a", "b", "c"]) == ["T:a", "T:b", "T:c"]
    expected_hits = 2 if isinstance(tail, int) else 3
    assert translator.usage.cache_hits == expected_hits
    assert len(server.chat_requests) == 3 + 3 - expected_hits
    assert "skipped 1 unreadable records" in caplog.text


def test_a_cache_that_cannot_be_written_fails_the_call(server: ChatServer, tmp_path: Path) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    with pytest.raises(OSError):
        make(server, cache_dir=not_a_directory).translate(["a", "b"])


CHILD = """
import json, sys
from bouquet_eval.translators.openai_chat import OpenAIChatTranslator

url, cache_dir, prompts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
translator = OpenAIChatTranslator(
    model="test-model", base_url=url, api_key_env=None, concurrency=4, cache_dir=cache_dir,
    timeout=60,
)
print(json.dumps(translator.translate(prompts)))
"""


def test_no_answer_is_paid_for_twice_after_a_kill(tmp_path: Path) -> None:
    prompts = [f"sentence {i}" for i in range(12)]
    cache_dir = tmp_path / "cache"
    environment = {**os.environ, "PYTHONPATH": python_path()}
    with ChatServer() as server:
        # Five answers, then requests that never end: the kill lands with four in flight.
        server.script(*(answer() for _ in range(5)))
        server.default = hang()
        command = [sys.executable, "-c", CHILD, server.url, str(cache_dir), json.dumps(prompts)]
        child = subprocess.Popen(command, env=environment, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(
                lambda: (
                    len(server.chat_requests) == 9 and len(RequestCache(cache_dir).answers()) == 5
                ),
                seconds=30,
            )
        finally:
            child.kill()
            _, stderr = child.communicate(timeout=10)
        assert child.returncode == -signal.SIGKILL, stderr
        killed_run = server.chat_requests
        server.default = answer()
        translator = OpenAIChatTranslator(
            model="test-model", base_url=server.url, api_key_env=None, cache_dir=cache_dir
        )
        results = translator.translate(prompts)
        rerun = server.chat_requests[len(killed_run) :]
    assert results == [f"T:{prompt}" for prompt in prompts]
    # Every prompt answered exactly once over both runs, and the rerun asked only for the rest.
    assert Counter(server.answered_prompts()) == Counter(prompts)
    answered_before = {request.prompt for request in killed_run if request.answered}
    assert len(answered_before) == 5
    assert sorted(str(request.prompt) for request in rerun) == sorted(
        set(prompts) - answered_before
    )
    assert (translator.usage.cache_hits, translator.usage.requests) == (5, 7)


# Many directions as one stream


def test_requests_stay_in_flight_across_directions(server: ChatServer) -> None:
    translator = make(server, concurrency=4)
    assert isinstance(translator, BatchTranslator)
    first = [f"a{i}" for i in range(5)]
    second = [f"b{i}" for i in range(5)]
    slow, quick = answer(delay=0.5), answer()
    server.default = lambda handler, request: (slow if request.prompt == "a4" else quick)(
        handler, request
    )
    sent_when_taken = []

    def batches() -> Iterator[list[str]]:
        for batch in (first, second, []):
            sent_when_taken.append(len(server.chat_requests))
            yield batch

    finished = list(translator.translate_batches(batches()))
    # The second direction was taken only once the first one's requests left room for more,
    # and its requests went out beside a4, and so finished before it.
    assert sent_when_taken[0] == 0 and sent_when_taken[1] >= 2
    order = [index for index, _ in finished]
    assert order.index(1) < order.index(0) and order[-1] == 0
    assert dict(finished) == {
        0: [f"T:{prompt}" for prompt in first],
        1: [f"T:{prompt}" for prompt in second],
        2: [],
    }
    assert translator.usage.requests == 10


def test_identical_prompts_share_one_request_across_directions(server: ChatServer) -> None:
    translator = make(server)
    finished = dict(translator.translate_batches([["x", "y"], ["y", "z", "x"]]))
    assert finished == {0: ["T:x", "T:y"], 1: ["T:y", "T:z", "T:x"]}
    assert sorted(str(request.prompt) for request in server.chat_requests) == ["x", "y", "z"]


def test_a_failure_names_its_direction_and_keeps_the_others(
    server: ChatServer, tmp_path: Path
) -> None:
    translator = make(server, concurrency=1, cache_dir=tmp_path)
    server.script(answer(), answer(), answer(), error(400, "too long"))
    stream = translator.translate_batches([["a0", "a1"], ["b0", "b1", "b2"], ["c0"]])
    assert next(stream) == (0, ["T:a0", "T:a1"])
    with pytest.raises(BatchError) as failure:
        next(stream)
    assert failure.value.index == 1
    assert str(failure.value) == (
        "prompt 2: the server refused the request: HTTP 400: too long (0 other prompts failed "
        "as well and 1 were not sent; the answers received are kept)"
    )
    with pytest.raises(StopIteration):
        next(stream)
    # b0's answer is kept: a rerun asks only for b1, b2 and c0.
    rerun = make(server, cache_dir=tmp_path)
    assert dict(rerun.translate_batches([["b0", "b1", "b2"], ["c0"]])) == {
        0: ["T:b0", "T:b1", "T:b2"],
        1: ["T:c0"],
    }
    assert rerun.usage.cache_hits == 1
    assert sorted(str(request.prompt) for request in server.chat_requests[4:]) == ["b1", "b2", "c0"]


def test_a_stream_closed_early_keeps_its_answers(server: ChatServer, tmp_path: Path) -> None:
    translator = make(server, concurrency=2, cache_dir=tmp_path)
    batches = [["a0", "a1"], ["b0", "b1"], ["c0"]]
    stream = translator.translate_batches(batches)
    index, answers = next(stream)
    assert answers == [f"T:{prompt}" for prompt in batches[index]]
    stream.close()
    # Every answer received is kept, the batch yielded first among them. The server may have
    # sent more: a request cancelled as the stream closed may have been answered meanwhile.
    answered = set(server.answered_prompts())
    assert 2 <= len(RequestCache(tmp_path).answers()) <= len(answered)


def test_a_server_that_stops_answering_is_a_stall(server: ChatServer, tmp_path: Path) -> None:
    dataset = resolve_dataset({"path": str(SAMPLE)})
    directions = [Direction.parse("eng_Latn-deu_Latn"), Direction.parse("eng_Latn-fra_Latn")]
    # The German direction is answered; the French one gets no answer, and no error either.
    never, quick = hang(), answer()
    server.default = lambda handler, request: (
        never if "French" in (request.prompt or "") else quick
    )(handler, request)
    translator = make(server, timeout=600.0, cache_dir=tmp_path / "requests")
    translator.translate([])  # the client's import, which counts as no progress
    # Without the watchdog, the request would time out after 600 s: another error.
    stall_timeout = round(patience(1), 1)
    with pytest.raises(TranslatorStalled, match=r"model out, direction eng_Latn-fra_Latn: the "
                       rf"translator made no progress for {stall_timeout:g} s"):  # fmt: skip
        translate_directions(
            directions,
            dataset,
            tmp_path / "out",
            lambda: (translator, build_prompt),
            {"translator": "openai"},
            limit=3,
            stall_timeout=stall_timeout,
        )
    assert [path.name for path in (tmp_path / "out").glob("*.jsonl")] == ["eng_Latn-deu_Latn.jsonl"]
    assert len(RequestCache(tmp_path / "requests").answers()) == 3


# Secrets


def test_the_api_key_never_leaks(
    server: ChatServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # Servers may quote the credentials they got; the translator must not pass them on.
    server.script(
        error(429, "slow down", headers={"retry-after-ms": "1"}, echo_authorization=True),
        answer(),
        error(401, "invalid key", echo_authorization=True),
    )
    translator = make(server, cache_dir=tmp_path)
    translator.translate(["a"])
    with pytest.raises(ChatRequestError) as raised:
        translator.translate(["b"])
    assert all(request.headers["authorization"] == f"Bearer {KEY}" for request in server.requests)
    assert "invalid key" in str(raised.value) and "<redacted>" in str(raised.value)
    assert "slow down (got 'Bearer <redacted>')" in caplog.text
    places = {
        "exception": str(raised.value),
        "log": caplog.text,
        "repr": repr(translator),
        "attributes": repr(vars(translator)),
        **{path.name: path.read_text() for path in tmp_path.iterdir()},
    }
    assert [name for name, text in places.items() if KEY in text] == []


def test_a_placeholder_key_leaves_translations_whole(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local server's placeholder key (EMPTY) is no credential: a translation that holds the
    word keeps it; an answer that is nothing but the key is still kept nowhere."""
    monkeypatch.setenv(KEY_VARIABLE, "EMPTY")
    server.script(answer(content="EMPTY ROOM"), answer(content="EMPTY"))
    assert make(server, concurrency=1).translate(["a", "b"]) == ["EMPTY ROOM", "<redacted>"]


def test_a_missing_key_variable_is_named(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_VARIABLE)
    with pytest.raises(MissingAPIKeyError, match=f"environment variable {KEY_VARIABLE} is not"):
        make(server)
    assert server.requests == []


def test_a_keyless_server_needs_no_variable(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert make(server, api_key_env=None).translate(["a"]) == ["T:a"]
    (request,) = server.chat_requests
    assert "authorization" not in request.headers
    assert request.headers["user-agent"].startswith("bouquet-eval/")


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_requests_go_through_the_proxy_the_environment_names(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # The test server answers proxy requests too; the endpoint's name never resolves.
    address = server.url.removeprefix("http://").removesuffix("/v1")
    monkeypatch.setenv(variable, f"http://user%40lab:p%3Ass@{address}")
    translator = make(server, base_url="http://api.example.invalid/v1")
    assert translator.translate(["a", "b"]) == ["T:a", "T:b"]
    requests = server.chat_requests
    assert {request.target for request in requests} == {
        "http://api.example.invalid/v1/chat/completions"
    }
    assert {request.headers["host"] for request in requests} == {"api.example.invalid"}
    # user@lab:p:ss, as Basic credentials.
    expected = "Basic dXNlckBsYWI6cDpzcw=="
    assert {request.headers["proxy-authorization"] for request in requests} == {expected}


def test_an_https_endpoint_gives_the_proxy_its_credentials_and_not_the_key(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = server.url.removeprefix("http://").removesuffix("/v1")
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:secret@{address}")
    translator = make(server, base_url="https://api.example.invalid/v1", max_retries=0)
    with pytest.raises(ChatRequestError, match=r"prompt 1: .*connection failed .*502"):
        translator.translate(["a"])
    (connect,) = server.requests
    assert (connect.method, connect.target) == ("CONNECT", "api.example.invalid:443")
    assert connect.headers["proxy-authorization"] == "Basic dXNlcjpzZWNyZXQ="
    assert [value for value in connect.headers.values() if KEY in value] == []


def test_no_proxy_sends_requests_directly(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert make(server).translate(["a"]) == ["T:a"]
    (request,) = server.chat_requests
    assert request.target == "/v1/chat/completions"
    assert "proxy-authorization" not in request.headers


def test_importing_the_module_does_not_import_the_http_client() -> None:
    code = (
        "import sys, bouquet_eval.translators.openai_chat, bouquet_eval.translators.reasoning\n"
        "assert 'openai' not in sys.modules, 'openai was imported'"
    )
    environment = {**os.environ, "PYTHONPATH": python_path()}
    subprocess.run([sys.executable, "-c", code], env=environment, check=True)


# The server itself


def test_the_server_lists_its_model(server: ChatServer) -> None:
    with urllib.request.urlopen(f"{server.url}/models", timeout=5) as response:
        listing = json.load(response)
    assert [model["id"] for model in listing["data"]] == ["test-model"]


def test_the_server_stops_promptly_with_requests_held_and_connections_idle() -> None:
    server = ChatServer(default=hang())
    with server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        held = socket.create_connection(("127.0.0.1", port), timeout=5)
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        body = b'{"messages": [{"role": "user", "content": "x"}]}'
        held.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        wait_until(lambda: len(server.chat_requests) == 1, seconds=5)
        started = time.monotonic()
    # At once: neither the held request nor the idle connection is waited for.
    assert time.monotonic() - started < patience(2.0)
    assert not [thread for thread in threading.enumerate() if "process_request" in thread.name]
    assert held.recv(1) == b""  # closed without an answer
    held.close()
    idle.close()


def test_each_direction_counts_its_own_requests_and_cache_hits(
    server: ChatServer, tmp_path: Path
) -> None:
    """Requests of several directions overlap; each direction's counts, taken when it is
    handed back as timing.csv takes them, are its own: its sentences' requests and retries."""
    directions = [[f"{name}{i}" for i in range(5)] for name in "abcd"]
    slow, quick = answer(delay=0.3), answer()
    faults = {"b2": [error(503)]}

    def reply(handler: Any, request: Any) -> None:
        pending = faults.get(request.prompt)
        if pending:
            pending.pop()(handler, request)
            return
        (slow if request.prompt.endswith("0") else quick)(handler, request)

    server.default = reply

    def counted(translator: OpenAIChatTranslator) -> dict[int, tuple[int, ...]]:
        before = (0, 0, 0)
        per_direction = {}
        for index, _ in translator.translate_batches(directions):
            usage = translator.usage
            now = (usage.requests, usage.retries, usage.cache_hits)
            per_direction[index] = tuple(n - b for n, b in zip(now, before, strict=True))
            before = now
        return per_direction

    first = counted(make(server, concurrency=16, cache_dir=tmp_path))
    assert first == {0: (5, 0, 0), 1: (6, 1, 0), 2: (5, 0, 0), 3: (5, 0, 0)}
    # Again, every answer from the cache.
    assert counted(make(server, concurrency=16, cache_dir=tmp_path)) == {
        index: (0, 0, 5) for index in range(4)
    }
