"""Failing a job whose translator makes no progress, instead of letting it hang for ever.

A thread looks at a progress probe (what the translator has counted, how many directions have
been handed over and come back) every few seconds. When nothing has changed for `timeout`
seconds it logs why, and interrupts the main thread with a signal whose handler raises
`TranslatorStalled`: a translator waiting on a socket, a lock or a sleep stops there, and the
job fails through the usual path (its log, Snakemake's error). A translator stuck where Python
cannot interrupt it (inside a native call that never returns) gets as long again as the
timeout, up to `MAX_GRACE` seconds, and then the process exits. Either way, every direction
published before is kept: outputs are written atomically, one direction at a time.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Hashable
from types import FrameType, TracebackType

log = logging.getLogger(__name__)

MAX_GRACE = 30.0
STALL_EXIT_STATUS = 3
_SIGNAL = signal.SIGALRM


class TranslatorStalled(BaseException):
    """The translator made no progress for longer than the configured time.

    Like KeyboardInterrupt, it interrupts whatever the main thread was doing, so it is not an
    `Exception`: a translator's `except Exception` (a retry loop, say) does not swallow it.
    """


class StallWatchdog:
    """Context manager: watches `probe()` while the block runs; `timeout=None` watches nothing.

    `describe()` gives the message of the failure (which direction, which model); it is called
    from the watching thread, so it must only read.
    """

    def __init__(
        self,
        timeout: float | None,
        probe: Callable[[], Hashable],
        describe: Callable[[], str],
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"stall_timeout must be positive (or null), not {timeout}")
        self.timeout = timeout
        self._probe = probe
        self._describe = describe
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._message = ""
        self._previous_handler: Callable[..., object] | int | None = None

    def __enter__(self) -> StallWatchdog:
        if self.timeout is None:
            return self
        if threading.current_thread() is not threading.main_thread():
            log.warning("stall_timeout is only watched in a program's main thread; not here")
            return self
        self._previous_handler = signal.signal(_SIGNAL, self._interrupt)
        self._thread = threading.Thread(
            target=self._watch, args=(threading.main_thread().ident,), daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        # None: a handler set outside Python, which cannot be put back; the default then.
        previous = self._previous_handler
        signal.signal(_SIGNAL, signal.SIG_DFL if previous is None else previous)

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        if self._message:
            raise TranslatorStalled(self._message)
        # Not ours (a translator's own alarm): to the handler that was there before.
        if callable(self._previous_handler):
            self._previous_handler(signum, frame)

    def _watch(self, main_thread: int | None) -> None:
        assert self.timeout is not None
        interval = min(self.timeout / 4, 5.0)
        last, since = self._probe(), time.monotonic()
        while not self._stop.wait(interval):
            state = self._probe()
            if state != last:
                last, since = state, time.monotonic()
                continue
            if time.monotonic() - since < self.timeout:
                continue
            self._message = self._describe()
            log.error("%s", self._message)
            assert main_thread is not None
            signal.pthread_kill(main_thread, _SIGNAL)
            if self._stop.wait(min(self.timeout, MAX_GRACE)):
                return
            log.error("the translator did not stop when interrupted; ending the process")
            _flush_logs()
            os._exit(STALL_EXIT_STATUS)


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
