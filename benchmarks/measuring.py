"""What the model-throughput benchmarks share: the machine they ran on, timing that waits for
the GPU, peak GPU memory, and the Markdown tables they print."""

from __future__ import annotations

import datetime
import json
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

Result = TypeVar("Result")
GIB = 2**30


def environment(device: str) -> dict[str, str]:
    """The device in words and the versions that decide the speed, for the results file."""
    import torch

    described = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": version("transformers"),
        "tokenizers": version("tokenizers"),
    }
    if device.startswith("cuda"):
        properties = torch.cuda.get_device_properties(device)
        described["device"] = (
            f"{properties.name}, {properties.total_memory / GIB:.0f} GiB, "
            f"{properties.multi_processor_count} SMs"
        )
        described["cuda"] = str(torch.version.cuda)
    else:
        cpu = platform.processor() or platform.machine()
        described["device"] = f"CPU ({cpu}), {torch.get_num_threads()} torch threads"
    return described


@dataclass(frozen=True)
class Timed:
    seconds: float
    peak_gib: float | None
    """Peak GPU memory allocated by torch during the work (None on the CPU)."""


def timed(device: str, work: Callable[[], Result]) -> tuple[Timed, Result]:
    """Wall-clock time of `work()` with the GPU's queue drained at both ends, and its peak."""
    import torch

    on_gpu = device.startswith("cuda")
    if on_gpu:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    result = work()
    if on_gpu:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) / GIB if on_gpu else None
    return Timed(seconds, peak), result


def plan_record(name: str, took: Timed, segments: int, **measured: Any) -> dict[str, Any]:
    """A plan's line, printed, and its record: seconds, segments per second, peak memory and
    what else the benchmark `measured`."""
    print(f"{name}: {took.seconds:.2f} s, {segments / took.seconds:.1f} segments/s", flush=True)
    return {
        "plan": name,
        "segments": segments,
        "seconds": took.seconds,
        "segments_per_s": segments / took.seconds,
        "peak_gib": took.peak_gib,
        **measured,
    }


def is_out_of_memory(error: BaseException) -> bool:
    import torch

    return isinstance(error, torch.OutOfMemoryError)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: Path | None, record: dict[str, Any], leave_out: str | None = None) -> None:
    """Write `record`, without the entries named `leave_out` at any depth (bulky lists)."""
    if path is not None:

        def kept(value: Any) -> Any:
            if isinstance(value, dict):
                return {key: kept(item) for key, item in value.items() if key != leave_out}
            if isinstance(value, list):
                return [kept(item) for item in value]
            return value

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(kept(record), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
