"""Throughput of `OpenAIChatTranslator` against a local server that answers in a fixed time.

The server (tests/chat_server.py) runs in a process of its own, as a real one would, and
answers every request after `--latency` seconds. For each concurrency the translator sends
`--requests` distinct prompts in one `translate` call (by default 854, one BOUQuET direction:
what the workflow gives one call), `--repeats` times; printed are the best run's requests/s,
its ratio to the ideal concurrency / latency (target at 64: >= 0.8), and the CPU time per
request of the translator and of the server. The translator's bounds throughput from a single
event loop at about 1000 / (CPU ms per request) requests/s whatever the concurrency; the two
together must fit in the machine's cores. `--cache DIR` adds rows with a request cache in DIR,
to show what its fsyncs cost on that file system.

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
from multiprocessing.connection import Connection
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
# This checkout's package, whichever one the environment was installed from, and the test
# server, which lives with the tests.
sys.path[:0] = [str(REPOSITORY / "scripts"), str(REPOSITORY)]
from bouquet_eval.translators.openai_chat import OpenAIChatTranslator  # noqa: E402
from tests.chat_server import ChatServer  # noqa: E402


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


def measure(
    server: Connection, url: str, concurrency: int, requests: int, cache: Path | None
) -> tuple[float, float, float]:
    """Wall, CPU and server CPU seconds of one `translate` call of `requests` prompts."""
    with contextlib.ExitStack() as stack:
        cache_dir = (
            None if cache is None else stack.enter_context(tempfile.TemporaryDirectory(dir=cache))
        )
        translator = OpenAIChatTranslator(
            model="test-model",
            base_url=url,
            api_key_env=None,
            concurrency=concurrency,
            cache_dir=cache_dir,
            max_retries=0,
        )
        prompts = [f"benchmark sentence {concurrency} {index}" for index in range(requests)]
        served = server_cpu(server)
        wall, cpu = time.perf_counter(), time.process_time()
        results = translator.translate(prompts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        served = server_cpu(server) - served
    if results != [f"T:{prompt}" for prompt in prompts]:
        raise AssertionError("wrong answers")
    return wall, cpu, served


def measure_directions(url: str, concurrency: int, directions: list[list[str]]) -> float:
    """Seconds of one call per direction over those of one stream, for the same requests."""
    translator = OpenAIChatTranslator(
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
    try:
        url = parent.recv()
        measure(parent, url, 4, 8, None)  # imports and first connections, outside the timings
        print(f"latency {arguments.latency * 1000:.0f} ms, {arguments.requests} requests per run")
        print(
            f"{'concurrency':>11} {'cache':>5} {'seconds':>8} {'requests/s':>10} "
            f"{'ideal/s':>8} {'ratio':>6} {'CPU ms/request':>14} {'server CPU ms':>13}"
        )
        caches = [None] if arguments.cache is None else [None, arguments.cache]
        for concurrency in arguments.concurrency:
            for cache in caches:
                runs = [
                    measure(parent, url, concurrency, arguments.requests, cache)
                    for _ in range(arguments.repeats)
                ]
                wall, cpu, served = min(runs)
                rate = arguments.requests / wall
                ideal = concurrency / arguments.latency
                print(
                    f"{concurrency:>11} {'no' if cache is None else 'yes':>5} {wall:>8.2f} "
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
                f"{'concurrency':>11} {'one call per direction / one stream (seconds, median)':>54}"
            )
            for concurrency in arguments.concurrency:
                ratio = statistics.median(
                    measure_directions(url, concurrency, directions)
                    for _ in range(arguments.repeats)
                )
                print(f"{concurrency:>11} {ratio:>54.2f}", flush=True)
    finally:
        parent.send("stop")
        server.join(timeout=10)


if __name__ == "__main__":
    main()
