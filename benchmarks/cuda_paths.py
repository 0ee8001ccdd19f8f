"""The project's GPU paths, checked on a CUDA machine (run there: `python benchmarks/cuda_paths.py`;
`python benchmarks/cuda_paths.py cpu` runs the same checks on the CPU).

1. Each family (tiny random NLLB, MADLAD, Aya checkpoints) on the GPU in float32: directions
   sorted together (translate_batches) give exactly what each direction alone gives.
2. device/dtype "auto" resolve to cuda/bfloat16, and a stream of directions runs there.
3. MetricX (tiny mT5) on the GPU with "auto" (bf16) against the CPU in float32.
"""

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = ["scripts", "."]

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from bouquet_eval.metrics.metricx import MetricX  # noqa: E402
from tests.seq2seq_inputs import four_directions, make  # noqa: E402
from tests.tiny_mt5 import build_tiny_mt5  # noqa: E402
from tests.tiny_seq2seq import build_aya, build_madlad, build_nllb  # noqa: E402

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
report: dict[str, Any] = {"device": device, "torch": torch.__version__}
if device == "cuda":
    report["gpu"] = torch.cuda.get_device_name(0)
root = Path(tempfile.mkdtemp())
builders = {"nllb": build_nllb, "madlad": build_madlad, "aya": build_aya}
for family, build in builders.items():
    checkpoint = build(root / family)
    directions = four_directions(family)
    alone = make(family, checkpoint, device=device, dtype="float32")
    expected = [alone.translate(prompts) for prompts in directions]
    streamed = make(family, checkpoint, device=device, dtype="float32")
    got = dict(streamed.translate_batches(directions))
    auto = make(family, checkpoint, device="auto", dtype="auto")
    started = time.monotonic()
    auto_out = dict(auto.translate_batches(directions))
    report[family] = {
        "float32 stream equals alone": got == dict(enumerate(expected)),
        "model device": str(streamed.model.device),
        "auto resolves to": [auto.resolved_device(), auto.resolved_dtype()],
        "auto model dtype": str(auto.model.dtype),
        "auto stream directions": len(auto_out),
        "auto stream seconds": round(time.monotonic() - started, 3),
    }

metricx_checkpoint = build_tiny_mt5(root / "metricx")
rows = pd.DataFrame(
    {
        "src_text": ["Bonjour le monde.", "Wie geht es dir?", "你好", ""],
        "mt_text": ["Hello world.", "How are you?\n", "Hello", " "],
        "ref_text": ["Hello, world.", "How are you doing?", "Hi", "Nothing"],
    }
)
scores: dict[str, Any] = {}
placements: list[tuple[str, dict[str, Any]]] = [
    ("cpu float32", {"device": "cpu", "dtype": "float32"}),
    ("gpu auto", {"device": "auto", "dtype": "auto"}),
]
for where, settings in placements:
    metric = MetricX(
        model=str(metricx_checkpoint.model), tokenizer=str(metricx_checkpoint.tokenizer), **settings
    )
    scores[where] = metric.score(rows)["metricx"]
    report[f"metricx {where} signature"] = metric.signature()
report["metricx scores"] = scores
report["metricx max |gpu bf16 - cpu fp32|"] = max(
    abs(a - b) for a, b in zip(scores["cpu float32"], scores["gpu auto"], strict=True)
)
print(json.dumps(report, indent=1))
