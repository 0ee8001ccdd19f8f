"""Where a neural model runs, and in which precision, when the configuration says "auto"."""

from __future__ import annotations


def resolve_device(device: str) -> str:
    """A GPU when there is one, else the CPU; an explicit device is kept."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> str:
    """bfloat16 on a GPU, float32 on the CPU; an explicit dtype is kept."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if resolve_device(device).startswith("cuda") else "float32"
