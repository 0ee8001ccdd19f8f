"""The chat translator's Batch API mode against the local server's Files and Batches API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bouquet_eval.data.dataset import Direction, resolve_dataset
from bouquet_eval.translation.translate import TIMING_DIR, translate_directions
from bouquet_eval.translators import BatchError, openai_batch
from bouquet_eval.translators.openai_batch import BatchesPending
from bouquet_eval.translators.openai_chat import OpenAIChatTranslator
from bouquet_eval.translators.prompt import build_prompt

from .batch_api import ERROR_FIRST, EXPIRE_HALF, FAIL
from .chat_server import ChatServer
from .conftest import SAMPLE, python_path, wait_until

DIRECTIONS = [[f"a{i}" for i in range(5)], [f"b{i}" for i in range(4)], ["a0", "c0"]]
EXPECTED = {
    index: [f"T:{prompt}" for prompt in prompts] for index, prompts in enumerate(DIRECTIONS)
}
PROMPTS = {prompt for prompts in DIRECTIONS for prompt in prompts}


@pytest.fixture
def server() -> Any:
    with ChatServer() as running:
        yield running


def batch_translator(server: ChatServer, cache: Path, **settings: Any) -> OpenAIChatTranslator:
    defaults: dict[str, Any] = {
        "model": "test-model",
        "base_url": server.url,
        "api_key_env": None,
        "cache_dir": cache,
        "mode": "batch",
        "batch_poll_interval": 0.01,
        "max_retries": 2,
    }
    return OpenAIChatTranslator(**{**defaults, **settings})


def test_batch_and_online_modes_give_the_same_outputs(server: ChatServer, tmp_path: Path) -> None:
    online = OpenAIChatTranslator(
        model="test-model", base_url=server.url, api_key_env=None, cache_dir=tmp_path / "online"
    )
    batch = batch_translator(server, tmp_path / "batch")
    assert dict(online.translate_batches(DIRECTIONS)) == EXPECTED
    assert dict(batch.translate_batches(DIRECTIONS)) == EXPECTED
    # One batch of the distinct prompts, each answered once, none through the chat endpoint.
    assert len(server.chat_requests) == len(PROMPTS)
    assert Counter(server.batches.answered_prompts) == Counter(PROMPTS)
    assert len(server.batches.batches) == 1
    # Tokens are counted as in the online mode (the server counts words).
    assert batch.usage.prompt_tokens == online.usage.prompt_tokens
    assert batch.usage.completion_tokens == online.usage.completion_tokens


def test_a_rerun_sends_nothing(server: ChatServer, tmp_path: Path) -> None:
    dict(batch_translator(server, tmp_path).translate_batches(DIRECTIONS))
    rerun = batch_translator(server, tmp_path)
    assert dict(rerun.translate_batches(DIRECTIONS)) == EXPECTED
    assert len(server.batches.batches) == 1
    assert rerun.usage.requests == 0


@pytest.mark.parametrize("fault", [FAIL, EXPIRE_HALF, ERROR_FIRST])
def test_unanswered_requests_go_into_a_later_batch(
    server: ChatServer, tmp_path: Path, fault: str
) -> None:
    server.batches.script(fault)
    translator = batch_translator(server, tmp_path)
    assert dict(translator.translate_batches(DIRECTIONS)) == EXPECTED
    assert len(server.batches.batches) == 2
    assert Counter(server.batches.answered_prompts) == Counter(PROMPTS)
    retried = json.loads(server.batches.files["file-1"].splitlines()[0])["custom_id"]
    assert retried  # the first batch's input file holds keys, not prompts
    if fault == EXPIRE_HALF:
        second_input = server.batches.batches["batch-2"]["input_file_id"]
        assert (
            len(server.batches.files[second_input].splitlines()) == len(PROMPTS) - len(PROMPTS) // 2
        )


def test_a_lost_connection_while_polling_is_polled_again(
    server: ChatServer, tmp_path: Path
) -> None:
    server.batches.drop_next_retrieve = True
    translator = batch_translator(server, tmp_path, max_retries=0)
    assert dict(translator.translate_batches(DIRECTIONS)) == EXPECTED
    assert len(server.batches.batches) == 1
    assert Counter(server.batches.answered_prompts) == Counter(PROMPTS)


def test_a_create_whose_reply_is_lost_makes_one_batch(server: ChatServer, tmp_path: Path) -> None:
    server.batches.drop_next_create = True
    translator = batch_translator(server, tmp_path)
    assert dict(translator.translate_batches(DIRECTIONS)) == EXPECTED
    assert len(server.batches.batches) == 1
    assert Counter(server.batches.answered_prompts) == Counter(PROMPTS)


def test_a_request_that_keeps_failing_is_named(server: ChatServer, tmp_path: Path) -> None:
    server.batches.script(ERROR_FIRST, ERROR_FIRST)
    translator = batch_translator(server, tmp_path, max_retries=1)
    finished = {}
    with pytest.raises(BatchError) as raised:
        for index, answers in translator.translate_batches(DIRECTIONS):
            finished[index] = answers
    # The request that failed twice is the first of the first batch's (sorted) keys.
    first_key = json.loads(server.batches.files["file-1"].splitlines()[0])["custom_id"]
    failing = next(p for p in PROMPTS if translator.key(p) == first_key)
    index = next(i for i, prompts in enumerate(DIRECTIONS) if failing in prompts)
    assert raised.value.index == index
    position = DIRECTIONS[index].index(failing) + 1
    assert str(raised.value).startswith(
        f"prompt {position}: gave up after 2 batches; the last one: HTTP 500: injected failure"
    )
    assert all(failing not in DIRECTIONS[i] for i in finished)
    assert Counter(server.batches.answered_prompts) == Counter(PROMPTS - {failing})


def test_a_job_that_stops_waiting_is_picked_up_by_the_rerun(
    server: ChatServer, tmp_path: Path
) -> None:
    with pytest.raises(BatchesPending, match=r"1 batches still pending after 0 s \(batch-1\)"):
        dict(batch_translator(server, tmp_path, batch_wait=0).translate_batches(DIRECTIONS))
    # The rerun looks before it gives up waiting, and so finds the batch done.
    rerun = batch_translator(server, tmp_path, batch_wait=0)
    assert dict(rerun.translate_batches(DIRECTIONS)) == EXPECTED
    assert len(server.batches.batches) == 1
    assert rerun.usage.requests == 0


def test_input_files_keep_to_the_limits(
    server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_batch, "MAX_REQUESTS_PER_FILE", 3)
    translator = batch_translator(server, tmp_path)
    assert dict(translator.translate_batches(DIRECTIONS)) == EXPECTED
    assert len(server.batches.batches) == 4  # 10 distinct prompts, 3 to a file
    assert Counter(server.batches.answered_prompts) == Counter(PROMPTS)


CHILD = """
import json, sys
from bouquet_eval.translators.openai_chat import OpenAIChatTranslator

url, cache_dir, directions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
translator = OpenAIChatTranslator(
    model="test-model", base_url=url, api_key_env=None, cache_dir=cache_dir, mode="batch",
    batch_poll_interval=0.01, timeout=60, max_retries=0,
)
print(json.dumps(dict(translator.translate_batches(directions))))
"""


def test_a_kill_between_upload_and_create_pays_nothing_twice(
    server: ChatServer, tmp_path: Path
) -> None:
    # The create reaches the server, which makes the batch, but the reply never comes back:
    # the job is killed before it can record the batch.
    server.batches.hang_creates = True
    command = [sys.executable, "-c", CHILD, server.url, str(tmp_path), json.dumps(DIRECTIONS)]
    environment = {**os.environ, "PYTHONPATH": python_path()}
    child = subprocess.Popen(command, env=environment, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(server.batches.batches) == 1, seconds=30)
    finally:
        child.kill()
        _, stderr = child.communicate(timeout=10)
    assert child.returncode == -signal.SIGKILL, stderr
    server.batches.hang_creates = False
    rerun = batch_translator(server, tmp_path)
    assert dict(rerun.translate_batches(DIRECTIONS)) == EXPECTED
    # The rerun found the batch among the account's, instead of making a second one.
    assert len(server.batches.batches) == 1
    assert Counter(server.batches.answered_prompts) == Counter(PROMPTS)


def ready(
    translator: OpenAIChatTranslator,
) -> Callable[[], tuple[OpenAIChatTranslator, Callable[[str, str, str], str]]]:
    return lambda: (translator, build_prompt)


def test_a_translate_job_in_batch_mode_publishes_what_the_online_one_does(
    server: ChatServer, tmp_path: Path
) -> None:
    dataset = resolve_dataset({"path": str(SAMPLE)})
    directions = [Direction.parse("eng_Latn-deu_Latn"), Direction.parse("eng_Latn-fra_Latn")]
    published = {}

    def prompts(direction: Direction) -> list[str]:
        rows = dataset.load(direction, 3)
        return [build_prompt(r.src_lang, r.tgt_lang, r.src_text) for r in rows.itertuples()]

    for mode in ("online", "batch"):
        output = tmp_path / mode / "model"
        translator = batch_translator(server, output / ".cache" / "requests", mode=mode)
        translate_directions(
            directions,
            dataset,
            output,
            ready(translator),
            {"translator": "openai"},
            limit=3,
        )
        published[mode] = {path.name: path.read_bytes() for path in output.glob("*.jsonl")}
        timing = [
            json.loads((output / TIMING_DIR / f"{direction}.json").read_text())
            for direction in directions
        ]
        # Each direction's own tokens (the server counts words): 3 prompts of one template.
        words = [sum(len(p.split()) for p in prompts(direction)) for direction in directions]
        assert [record["prompt_tokens"] for record in timing] == words
    assert published["batch"] == published["online"]
    assert len(published["batch"]) == 2
    assert len(server.batches.batches) == 1
