"""What a model's API requests cost, from the tokens each direction used and the `prices` table.

Prices are per million tokens: `input` for prompt tokens, `output` for completion tokens (which
include reasoning tokens, as APIs bill them). A model run with `mode: batch` pays
(1 - `batch_discount`) of that. Only tokens the API reported in the job that translated the
direction are counted: answers taken from the request cache were paid for by an earlier job,
whose counts were lost with it if it was killed before publishing the direction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

COST = "cost"


def token_cost(
    prompt_tokens: float, completion_tokens: float, price: Mapping[str, Any], batch: bool
) -> float:
    full = (prompt_tokens * price["input"] + completion_tokens * price["output"]) / 1e6
    return full * (1 - price.get("batch_discount", 0.5)) if batch else full


def model_price(config: Mapping[str, Any], model: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The model's prices, or None when the configuration gives none."""
    return config.get("prices", {}).get(model["name"])


def is_batch(model: Mapping[str, Any]) -> bool:
    return model.get("translator") == "openai" and model.get("mode") == "batch"


def with_costs(timing: pd.DataFrame, price: Mapping[str, Any] | None, batch: bool) -> pd.DataFrame:
    """`timing` (one row per direction) with a cost column, where prices and tokens are known."""
    if price is None or timing.empty or "prompt_tokens" not in timing:
        return timing
    costed = timing.copy()
    completion = costed.get("completion_tokens", 0)
    costed[COST] = token_cost(costed["prompt_tokens"], completion, price, batch)
    return costed
