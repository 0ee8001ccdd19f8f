"""What the model-throughput benchmarks share: the machine they ran on, timing that waits for
the GPU, peak GPU memory, and the Markdown tables they print."""

from __future__ import annotations

import datetime
import json
import platform
import statistics
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


@dataclass(frozen=True)
class Repeated:
    """The same work timed several times in a row, after it ran once untimed or timed apart
    (`cold`): what a steady state is measured from."""

    seconds: list[float]
    peak_gib: float | None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def spread(self) -> str:
        """The median with the least and the largest, and the range as a share of the median."""
        low, high = min(self.seconds), max(self.seconds)
        return (
            f"{self.median:.3f} s ({low:.3f}-{high:.3f}, spread "
            f"{100 * (high - low) / self.median:.1f}%)"
        )

    def record(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "median_s": self.median, "peak_gib": self.peak_gib}


def repeated(device: str, work: Callable[[], Result], times: int) -> tuple[Repeated, Result]:
    """`work()` timed `times` times in a row (as `timed` times it); the last result."""
    runs = [timed(device, work) for _ in range(times)]
    peaks = [run.peak_gib for run, _ in runs if run.peak_gib is not None]
    return Repeated([run.seconds for run, _ in runs], max(peaks) if peaks else None), runs[-1][1]


BF16_PEAK_TFLOPS = {"H100": 989.4, "H200": 989.4, "A100": 312.0, "L40S": 362.1, "L4": 121.0}
"""NVIDIA's dense bfloat16 figures (without sparsity) of SXM parts, by name."""


def bf16_peak_tflops(device: str) -> float | None:
    """The card's dense bfloat16 peak, from its name (None where the name is not known)."""
    import torch

    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in BF16_PEAK_TFLOPS.items() if key in name), None)


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


def matmul_tflops(device: str) -> float | None:
    """An 8192^3 bfloat16 matrix product's rate: what the card reaches on plain products."""
    import torch

    if device != "cuda":
        return None
    a, b = (torch.randn(8192, 8192, device=device, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    took, _ = timed(device, lambda: [a @ b for _ in range(10)])
    return 10 * 2 * 8192**3 / took.seconds / 1e12


def child_json(script: str, *arguments: str, env: dict[str, str] | None = None) -> Any:
    """What `script --child arguments` printed last, as JSON: a benchmark's step measured in a
    process of its own."""
    import subprocess
    import sys

    command = [sys.executable, script, "--child", *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if completed.returncode:
        raise RuntimeError(completed.stderr[-3000:])
    return json.loads(completed.stdout.strip().splitlines()[-1])


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
