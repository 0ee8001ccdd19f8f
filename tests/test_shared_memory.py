"""A job's ledger of its processes: on Ctrl-C, those it started and that still run are stopped
(vLLM's workers would otherwise hold the job for tens of seconds). Its ledger of shared memory
is tested with a real vLLM engine in test_vllm_workflow.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bouquet_eval.core.shared_memory import WATCH_INTERVAL, SharedMemoryLedger

# A child that, like vLLM's workers, does not end on Ctrl-C.
DEAF_TO_CTRL_C = (
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(300)"
)


def test_ctrl_c_stops_the_processes_the_job_started(tmp_path: Path) -> None:
    ledger = SharedMemoryLedger(tmp_path / "ledger.json")
    children: list[subprocess.Popen] = []
    try:
        with pytest.raises(KeyboardInterrupt), ledger.watching():
            children.append(subprocess.Popen([sys.executable, "-c", DEAF_TO_CTRL_C]))
            # Seen by the ledger's thread within a look.
            deadline = time.monotonic() + 10 * WATCH_INTERVAL
            while children[0].pid not in ledger.descendants and time.monotonic() < deadline:
                time.sleep(0.05)
            assert children[0].pid in ledger.descendants
            children[0].send_signal(signal.SIGINT)
            raise KeyboardInterrupt
        assert children[0].wait(timeout=10) == -signal.SIGKILL
    finally:
        for child in children:
            child.kill()
            child.wait()


def test_a_process_started_since_the_last_look_is_stopped_too(tmp_path: Path) -> None:
    ledger = SharedMemoryLedger(tmp_path / "ledger.json")
    child = subprocess.Popen([sys.executable, "-c", DEAF_TO_CTRL_C])
    try:
        assert ledger.descendants == {}
        assert ledger.stop_descendants() == [child.pid]
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
