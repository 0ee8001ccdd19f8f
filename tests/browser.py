"""Headless Chromium (Debian's package) driven over the DevTools protocol, for report tests;
headless Firefox (Debian's firefox-esr) over WebDriver BiDi, for the pages that must open in
both.

The page's console messages, uncaught exceptions and browser log entries are collected, so a
test can assert that a page rendered without errors; scripts run in the page and in its frames
(the Snakemake report shows a result in an iframe).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from . import debian

PACKAGE = "chromium"
# Flags from the machine notes: no sandbox as root, and nothing that reaches for the network.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1400,1000",
)


def chromium_path() -> str | None:
    return shutil.which("chromium")


def firefox_path() -> str | None:
    return shutil.which("firefox-esr") or shutil.which("firefox")


BROWSERS = {"chromium": (PACKAGE, chromium_path), "firefox": ("firefox-esr", firefox_path)}


def unavailable_reason(browser: str = "chromium") -> str | None:
    package, path = BROWSERS[browser]
    if path():
        return None
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return f"{package} is not installed, and apt-get as root is needed to install it"
    return None


def require(browser: str = "chromium") -> None:
    """Skip the calling test where `browser` cannot be had; install it where it is missing."""
    reason = unavailable_reason(browser)
    if reason:
        pytest.skip(reason)
    package, path = BROWSERS[browser]
    if not path():
        debian.install({package: package})


class Page:
    """One tab; `errors` holds every console error and exception seen since it opened."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self.errors: list[str] = []
        self.requests: list[str] = []  # every URL the page and its frames asked for
        self.contexts: dict[int, str] = {}  # execution context id -> frame id
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._reader = asyncio.create_task(self._read())

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[number] = future
        await self.socket.send_json({"id": number, "method": method, "params": params})
        reply = await asyncio.wait_for(future, timeout=30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def _read(self) -> None:
        async for message in self.socket:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            else:
                self._event(data.get("method", ""), data.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            words = [str(a.get("value", a.get("description"))) for a in params["args"]]
            self.errors.append("console: " + " ".join(words))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(
                "exception: " + details.get("exception", {}).get("description", details["text"])
            )
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"log: {params['entry']['text']}")
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.executionContextCreated":
            context = params["context"]
            self.contexts[context["id"]] = context.get("auxData", {}).get("frameId", "")

    async def open(self, url: str) -> None:
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.send(f"{domain}.enable")
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str, frame: str | None = None) -> Any:
        """The value of `expression` in the page, or in the frame whose id is `frame`."""
        arguments: dict[str, Any] = {"expression": expression, "returnByValue": True}
        if frame is not None:
            contexts = [c for c, f in self.contexts.items() if f == frame]
            if not contexts:
                raise LookupError(f"no script context in frame {frame}")
            arguments["contextId"] = max(contexts)
        result = await self.send("Runtime.evaluate", **arguments)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, frame: str | None = None, timeout: float = 20) -> Any:
        """Poll `expression` until it is truthy; its value."""
        return await poll(lambda: self.evaluate(expression, frame), expression, timeout)

    async def child_frames(self) -> list[dict[str, Any]]:
        tree = (await self.send("Page.getFrameTree"))["frameTree"]
        return [child["frame"] for child in tree.get("childFrames", [])]

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))


async def poll(evaluate: Callable[[], Awaitable[Any]], expression: str, timeout: float) -> Any:
    """`evaluate()` every tenth of a second until its value is truthy; that value. A page or
    frame not there yet (LookupError, IndexError) or a script failing in it (RuntimeError)
    counts as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(LookupError, RuntimeError):
            value = await evaluate()
            if value:
                return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"still false after {timeout} s: {expression}")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Page]:
    """A fresh headless Chromium with one tab; stopped (by its pid) on exit."""
    binary = chromium_path()
    if binary is None:
        raise FileNotFoundError("chromium is not installed")
    # Chromium's helper processes may still be writing the profile as the browser exits; the
    # whole process group is stopped, and what they leave is the temporary folder's to lose.
    with launched(
        "chromium",
        lambda profile: [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stderr=subprocess.DEVNULL,
    ) as (process, profile):
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as reply:
                targets = await reply.json()
            target = next(t for t in targets if t["type"] == "page")
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                page = Page(socket)
                try:
                    yield page
                finally:
                    page._reader.cancel()


@contextlib.contextmanager
def launched(
    browser: str, command: Callable[[str], list[str]], **streams: Any
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`command(profile folder)` started in a session of its own with a fresh profile; on exit
    the browser and every process it started are stopped, and the profile removed."""
    with tempfile.TemporaryDirectory(prefix=f"{browser}-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            command(profile),
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            **streams,
        )
        try:
            yield process, Path(profile)
        finally:
            stop_group(process)


def stop_group(process: subprocess.Popen) -> None:
    """Stop the browser and every process it started (renderers, crash handler)."""
    group = process.pid  # started in a session of its own: the group's id is the browser's
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    process.wait()


class FirefoxPage:
    """One Firefox tab over WebDriver BiDi: `evaluate` and `wait_for` as `Page`'s, where
    `frame` is the number of a child frame of the tab."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, context: str) -> None:
        self.socket = socket
        self.context = context
        self._ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        await self.socket.send_json({"id": number, "method": method, "params": params})
        while True:
            data = json.loads((await self.socket.receive()).data)
            if data.get("id") == number:
                if data.get("type") == "error":
                    raise RuntimeError(f"{method}: {data.get('message')}")
                return data["result"]

    async def open(self, url: str) -> None:
        await self.send("browsingContext.navigate", context=self.context, url=url, wait="complete")

    async def frames(self) -> list[str]:
        tree = await self.send("browsingContext.getTree", root=self.context)
        return [child["context"] for child in tree["contexts"][0].get("children") or []]

    async def evaluate(self, expression: str, frame: int | None = None) -> Any:
        context = self.context if frame is None else (await self.frames())[frame]
        result = await self.send(
            "script.evaluate",
            expression=expression,
            target={"context": context},
            awaitPromise=False,
        )
        if result.get("type") == "exception":
            raise RuntimeError(f"{expression}: {result['exceptionDetails']['text']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, frame: int | None = None, timeout: float = 30) -> Any:
        # A child frame not there yet is an IndexError here.
        return await poll(lambda: self.evaluate(expression, frame), expression, timeout)


@contextlib.asynccontextmanager
async def firefox() -> AsyncIterator[FirefoxPage]:
    """A fresh headless Firefox with one tab; stopped (by its pid) on exit."""
    binary = firefox_path()
    if binary is None:
        raise FileNotFoundError("firefox is not installed")
    with launched(
        "firefox",
        lambda profile: [binary, "--headless", "--no-remote", "--profile", profile,
                         "--remote-debugging-port=0", "--width=1400", "--height=1000"],
        stderr=subprocess.PIPE,
    ) as (process, _):  # fmt: skip
        assert process.stderr is not None
        address = None
        deadline = time.monotonic() + 60
        while address is None:
            line = await asyncio.to_thread(process.stderr.readline)
            if line.startswith("WebDriver BiDi listening on "):
                address = line.split(" on ", 1)[1].strip()
            elif not line or time.monotonic() > deadline:
                raise RuntimeError("firefox did not open its WebDriver BiDi port")
        # Firefox keeps writing to stderr: drained, so that it never blocks on it.
        threading.Thread(target=process.stderr.read, daemon=True).start()
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{address}/session", max_msg_size=0) as socket,
        ):
            page = FirefoxPage(socket, "")
            await page.send("session.new", capabilities={})
            tree = await page.send("browsingContext.getTree")
            page.context = tree["contexts"][0]["context"]
            yield page
