"""vLLM's OpenAI-compatible server on the tiny Llama: the same greedy text as the offline engine.

The server runs as a subprocess with the default (multiprocess) engine, as deployed, on a free
port of 127.0.0.1; it takes ~25 s and ~1.7 GB to start on 2 cores.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil  # a dependency of vllm and of snakemake
import pytest

from bouquet_eval.translators.vllm_offline import VLLMTranslator

from .tiny_llama import (
    ENGINE_SETTINGS,
    KV_CACHE_BYTES,
    MAX_MODEL_LEN,
    VLLM_TEST_ENV,
    pseudo_text,
    require_vllm,
    vllm_in_this_process,
)

pytestmark = pytest.mark.vllm
require_vllm()
MAX_TOKENS = 24
SERVED_NAME = "tiny"
STARTUP_TIMEOUT = 240.0
CLEAN_ENV = dict(os.environ)
_rng = random.Random(11)
PROMPTS = [pseudo_text(_rng, lines) for lines in (1, 2, 3, 4)]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path
    children: list[psutil.Process] = field(default_factory=list)

    def log_tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def healthy(url: str) -> bool:
    # Straight to 127.0.0.1, even where the environment names a proxy.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def stop(server: Server) -> list[psutil.Process]:
    """SIGTERM the server and wait for it; what is left of its processes afterwards."""
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=60)
    _, alive = psutil.wait_procs(server.children, timeout=30)
    return alive


def kill_leftovers(server: Server) -> None:
    """The last resort of teardown: SIGKILL whatever the server left running, by process id
    (psutil's handles notice a process id that has gone to another process)."""
    if server.process.poll() is None:
        server.process.kill()
    for child in server.children:
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.is_running():
                child.kill()
    server.process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        *("--model", str(tiny_llama), "--host", "127.0.0.1", "--port", str(port)),
        *("--dtype", ENGINE_SETTINGS["dtype"], "--max-model-len", str(MAX_MODEL_LEN)),
        *("--enforce-eager", "--seed", "0", "--served-model-name", SERVED_NAME),
        *("--kv-cache-memory-bytes", str(KV_CACHE_BYTES)),
    ]
    with log.open("wb") as output:
        # The multiprocess engine, as deployed, whatever the calling shell says.
        env = {**CLEAN_ENV, **VLLM_TEST_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    running = Server(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not healthy(running.url):
            if process.poll() is not None:
                pytest.fail(f"the server exited with {process.returncode}:\n{running.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(
                    f"no healthy server after {STARTUP_TIMEOUT:.0f} s:\n{running.log_tail()}"
                )
            time.sleep(0.5)
        running.children = psutil.Process(process.pid).children(recursive=True)
        yield running
    finally:
        if process.poll() is None:
            with contextlib.suppress(psutil.NoSuchProcess, subprocess.TimeoutExpired):
                running.children = psutil.Process(process.pid).children(recursive=True)
                stop(running)
        kill_leftovers(running)


@dataclass(frozen=True)
class OfflineRun:
    outputs: list[str]
    prompt_tokens: int


@pytest.fixture(scope="module")
def offline(tiny_llama: Path, server: Server) -> OfflineRun:
    """The offline engine's answers; built once the server is up, so as not to slow its start."""
    with vllm_in_this_process():
        translator = VLLMTranslator(model=str(tiny_llama), max_tokens=MAX_TOKENS, **ENGINE_SETTINGS)
        outputs = translator.translate(PROMPTS)
    assert translator.stats.finish_reasons["length"] == len(PROMPTS)
    return OfflineRun(outputs, translator.stats.prompt_tokens)


def test_sdk_chat_gives_the_offline_engine_text(server: Server, offline: OfflineRun) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=60)
    prompt_tokens = 0
    try:
        assert [model.id for model in client.models.list()] == [SERVED_NAME]
        for prompt, expected in zip(PROMPTS, offline.outputs, strict=True):
            reply = client.chat.completions.create(
                model=SERVED_NAME,
                messages=[{"role": "user", "content": prompt}],
                temperature=0,
                seed=0,
                max_tokens=MAX_TOKENS,
            )
            choice = reply.choices[0]
            assert choice.message.content == expected
            assert choice.finish_reason == "length"
            assert reply.usage is not None
            assert reply.usage.completion_tokens == MAX_TOKENS
            prompt_tokens += reply.usage.prompt_tokens
    finally:
        client.close()
    assert prompt_tokens == offline.prompt_tokens


def test_openai_chat_translator_gives_the_offline_engine_text(
    server: Server, offline: OfflineRun
) -> None:
    from bouquet_eval.translators.openai_chat import OpenAIChatTranslator

    translator = OpenAIChatTranslator(
        model=SERVED_NAME,
        base_url=f"{server.url}/v1",
        api_key_env=None,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        seed=0,
    )
    assert translator.translate(PROMPTS) == offline.outputs
    assert translator.usage.prompt_tokens == offline.prompt_tokens
    assert translator.usage.completion_tokens == len(PROMPTS) * MAX_TOKENS


def test_sigterm_stops_the_server_and_its_children(server: Server) -> None:
    assert server.children, "the multiprocess engine should run in a child process"
    alive = stop(server)
    assert not alive, f"still running after SIGTERM: {[process.pid for process in alive]}"
    assert not healthy(server.url)
