"""What a run will send to the API models it translates with, told by a dry run.

For each `translator: openai` model: the requests (one per distinct prompt of the directions
whose translations are not written yet, less those answered in the request cache already), the
input tokens those prompts hold, and, with a price, their cost. The
tokens are counted by the model's tokenizer when a Hugging Face tokenizer of that name is on this
machine already (nothing is downloaded), else as characters / `CHARACTERS_PER_TOKEN`. Output
tokens are taken to be those of the source sentences (a translation is about as long as its
source); reasoning, which a model may add, is not foreseen. Chat templates add a few tokens per
request that are not counted either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from bouquet_eval.data.outputs import translation_path
from bouquet_eval.planning.cost import token_cost
from bouquet_eval.planning.plan import ModelPlan, Plan
from bouquet_eval.translators import load_prompt_fn
from bouquet_eval.translators.openai_chat import OpenAIChatTranslator
from bouquet_eval.translators.request_cache import RequestCache

log = logging.getLogger(__name__)

# About what OpenAI's tokenizers give for English; text in other scripts takes more tokens.
CHARACTERS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class Estimate:
    model: str
    directions: int
    requests: int
    input_tokens: int
    output_tokens: int
    counted_by: str
    cost: float | None

    def line(self) -> str:
        cost = "" if self.cost is None else f", costing about {self.cost:,.4g}"
        return (
            f"bouquet-eval: {self.model} will send {self.requests:,} requests for "
            f"{self.directions} directions: about {self.input_tokens:,} input tokens "
            f"({self.counted_by}) and {self.output_tokens:,} output tokens{cost}"
        )


def token_counter(model_name: str) -> tuple[Callable[[str], int], str]:
    """The model's local tokenizer, else characters / CHARACTERS_PER_TOKEN; and which."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_name, local_files_only=True)
    except Exception:  # not installed, not on this machine, or not a hub name at all
        return (
            lambda text: round(len(text) / CHARACTERS_PER_TOKEN),
            f"characters / {CHARACTERS_PER_TOKEN:g}",
        )
    return lambda text: len(tokenizer.encode(text)), "the model's tokenizer"


def estimate_model(model: ModelPlan, plan: Plan) -> Estimate:
    todo = [d for d in plan.directions if not translation_path(model.folder, d).exists()]
    prompt_fn = load_prompt_fn(model.prompt_fn, model.prompt_kwargs)
    count, counted_by = token_counter(model.arguments["model"])
    system_prompt = model.arguments.get("system_prompt")
    system = count(system_prompt) if system_prompt else 0
    # Requests are told apart as the translator does; the key is no part of them.
    cache = model.request_cache
    if cache is None:  # the API's translator keeps one (`Backend.request_cache`)
        raise ValueError(f"model '{model.name}' keeps no answers to tell sent requests by")
    keyed = OpenAIChatTranslator(**{**model.arguments, "api_key_env": None}, cache_dir=cache)
    sent = set(RequestCache(cache).answers())
    requests = input_tokens = output_tokens = 0
    for direction in todo:
        rows = plan.dataset.load(direction, plan.limit)
        for row in rows.itertuples():
            prompt = prompt_fn(row.src_lang, row.tgt_lang, row.src_text)
            key = keyed.key(prompt)
            if key in sent:  # answered already, or the same prompt counted before
                continue
            sent.add(key)
            requests += 1
            input_tokens += system + count(prompt)
            output_tokens += count(row.src_text)
    price = model.price
    cost = None if price is None else token_cost(input_tokens, output_tokens, price, model.batch)
    return Estimate(model.name, len(todo), requests, input_tokens, output_tokens, counted_by, cost)


def api_estimates(plan: Plan) -> list[Estimate]:
    """An estimate for each API model of the plan."""
    return [
        estimate_model(model, plan)
        for model in plan.models.values()
        if model.translator == "openai"
    ]
