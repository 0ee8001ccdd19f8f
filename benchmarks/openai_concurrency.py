"""Throughput of `OpenAIChatTranslator` against a local server that answers in a fixed time,
for this checkout's translator (on the `openai` client) and, beside it, the aiohttp one it
replaced.

The server (tests/chat_server.py) runs in a process of its own, as a real one would, and
answers every request after `--latency` seconds. Each translator runs in a process of its own
too: the aiohttp one from its package as of `AIOHTTP_REVISION`, extracted from git history into
a temporary folder for the run. For each concurrency each translator sends `--requests` distinct
prompts in one `translate` call (by default 854, one BOUQuET direction: what the workflow gives
one call), `--repeats` times; printed are the best run's requests/s, its ratio to the ideal
concurrency / latency (target at 64: >= 0.8), and the CPU time per request of the translator
and of the server. A translator bounds throughput from a single event loop at about
1000 / (CPU ms per request) requests/s whatever the concurrency; it and the server together
must fit in the machine's cores. `--cache DIR` adds rows with a request cache in DIR, to show
what its fsyncs cost on that file system.

`--directions N` then splits the requests into N directions and times, at each concurrency,
one `translate` call per direction (each call's last wave of requests leaves places idle)
against the directions as one stream (`translate_batches`, which keeps `concurrency` requests
in flight across direction boundaries), in turns.

    .venv/bin/python benchmarks/openai_concurrency.py [--requests 854] [--latency 0.05]
        [--directions N]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
# The test server, which lives with the tests.
sys.path[:0] = [str(REPOSITORY)]
from tests.chat_server import ChatServer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import extract_package  # noqa: E402

# The last commit whose translator spoke HTTP through aiohttp.
AIOHTTP_REVISION = "3190f20579614b68bce5578453a80fef62b2ee34"


def serve(latency: float, connection: Connection) -> None:
    """Run the server, telling the parent its CPU seconds so far whenever asked, until the
    parent sends anything else (or goes away)."""
    with ChatServer(latency=latency) as server:
        connection.send(server.url)
        with contextlib.suppress(EOFError):  # the parent died: stop too
            while connection.recv() == "cpu":
                connection.send(time.process_time())


def server_cpu(connection: Connection) -> float:
    connection.send("cpu")
    return connection.recv()


def client(scripts: str, connection: Connection) -> None:
    """Run one implementation's measurements as the parent asks, until it sends None."""
    sys.path.insert(0, scripts)
    from bouquet_eval.translators.openai_chat import OpenAIChatTranslator

    measurements: dict[str, Callable[..., Any]] = {
        "call": measure_call,
        "directions": measure_directions,
    }
    with contextlib.suppress(EOFError):
        while (order := connection.recv()) is not None:
            name, arguments = order
            connection.send(measurements[name](OpenAIChatTranslator, *arguments))


def measure_call(
    translator_class: Any, url: str, concurrency: int, requests: int, cache: Path | None
) -> tuple[float, float]:
    """Wall and CPU seconds of one `translate` call of `requests` prompts."""
    with contextlib.ExitStack() as stack:
        cache_dir = (
            None if cache is None else stack.enter_context(tempfile.TemporaryDirectory(dir=cache))
        )
        translator = translator_class(
            model="test-model",
            base_url=url,
            api_key_env=None,
            concurrency=concurrency,
            cache_dir=cache_dir,
            max_retries=0,
        )
        prompts = [f"benchmark sentence {concurrency} {index}" for index in range(requests)]
        wall, cpu = time.perf_counter(), time.process_time()
        results = translator.translate(prompts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if results != [f"T:{prompt}" for prompt in prompts]:
        raise AssertionError("wrong answers")
    return wall, cpu


def measure_directions(
    translator_class: Any, url: str, concurrency: int, directions: list[list[str]]
) -> float:
    """Seconds of one call per direction over those of one stream, for the same requests."""
    translator = translator_class(
        model="test-model", base_url=url, api_key_env=None, concurrency=concurrency, max_retries=0
    )
    started = time.perf_counter()
    one_by_one = [translator.translate([f"a {prompt}" for prompt in batch]) for batch in directions]
    middle = time.perf_counter()
    streamed = dict(translator.translate_batches([[f"b {p}" for p in b] for b in directions]))
    ended = time.perf_counter()
    if [len(answers) for answers in one_by_one] != [
        len(streamed[i]) for i in range(len(directions))
    ]:
        raise AssertionError("wrong answers")
    return (middle - started) / (ended - middle)


class Implementation:
    """A translator in a process of its own, importing the package from `scripts`."""

    def __init__(self, name: str, scripts: Path) -> None:
        self.name = name
        self.connection, child = multiprocessing.Pipe()
        self.process = multiprocessing.get_context("spawn").Process(
            target=client, args=(str(scripts), child), daemon=True
        )
        self.process.start()

    def run(self, measurement: str, *arguments: Any) -> Any:
        self.connection.send((measurement, arguments))
        return self.connection.recv()

    def stop(self) -> None:
        self.connection.send(None)
        self.process.join(timeout=10)


def timed_call(
    implementation: Implementation,
    server: Connection,
    url: str,
    concurrency: int,
    requests: int,
    cache: Path | None,
) -> tuple[float, float, float]:
    """Wall, client CPU and server CPU seconds of one `translate` call."""
    served = server_cpu(server)
    wall, cpu = implementation.run("call", url, concurrency, requests, cache)
    return wall, cpu, server_cpu(server) - served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=854, help="per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row; the best is shown")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per reply")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--cache", type=Path, help="also measure with a request cache here")
    parser.add_argument("--directions", type=int, help="also compare one stream of N directions")
    arguments = parser.parse_args()

    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(
        target=serve, args=(arguments.latency, child), daemon=True
    )
    server.start()
    with contextlib.ExitStack() as stack:
        stack.callback(server.join, timeout=10)
        stack.callback(parent.send, "stop")
        old = extract_package(
            AIOHTTP_REVISION, Path(stack.enter_context(tempfile.TemporaryDirectory()))
        )
        implementations = [
            Implementation("openai", REPOSITORY / "scripts"),
            Implementation("aiohttp", old),
        ]
        for implementation in implementations:
            stack.callback(implementation.stop)
        url = parent.recv()
        for implementation in implementations:
            # Imports and first connections, outside the timings.
            implementation.run("call", url, 4, 8, None)
        print(f"latency {arguments.latency * 1000:.0f} ms, {arguments.requests} requests per run")
        print(
            f"{'client':>7} {'concurrency':>11} {'cache':>5} {'seconds':>8} {'requests/s':>10} "
            f"{'ideal/s':>8} {'ratio':>6} {'CPU ms/request':>14} {'server CPU ms':>13}"
        )
        caches = [None] if arguments.cache is None else [None, arguments.cache]
        for concurrency in arguments.concurrency:
            for cache in caches:
                for implementation in implementations:
                    runs = [
                        timed_call(
                            implementation, parent, url, concurrency, arguments.requests, cache
                        )
                        for _ in range(arguments.repeats)
                    ]
                    wall, cpu, served = min(runs)
                    rate = arguments.requests / wall
                    ideal = concurrency / arguments.latency
                    print(
                        f"{implementation.name:>7} {concurrency:>11} "
                        f"{'no' if cache is None else 'yes':>5} {wall:>8.2f} "
                        f"{rate:>10.1f} {ideal:>8.1f} {rate / ideal:>6.2f} "
                        f"{cpu / arguments.requests * 1000:>14.2f} "
                        f"{served / arguments.requests * 1000:>13.2f}",
                        flush=True,
                    )
        if arguments.directions:
            size = -(-arguments.requests // arguments.directions)
            prompts = [f"benchmark sentence {index}" for index in range(arguments.requests)]
            directions = [prompts[i : i + size] for i in range(0, len(prompts), size)]
            print(f"{len(directions)} directions of up to {size} requests")
            print(
                f"{'client':>7} {'concurrency':>11} "
                f"{'one call per direction / one stream (seconds, median)':>54}"
            )
            for concurrency in arguments.concurrency:
                for implementation in implementations:
                    ratio = statistics.median(
                        implementation.run("directions", url, concurrency, directions)
                        for _ in range(arguments.repeats)
                    )
                    print(f"{implementation.name:>7} {concurrency:>11} {ratio:>54.2f}", flush=True)


if __name__ == "__main__":
    main()
