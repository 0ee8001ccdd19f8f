"""Translating with vLLM's offline engine (`vllm.LLM`), one batch per `translate()` call.

Each prompt becomes a one-turn chat (after an optional system message) rendered by the model's
own chat template. All prompts of a call go to a single `LLM.chat`, which lets vLLM schedule
them as one continuous batch. Outputs are returned raw: stripping reasoning is the caller's job.

vLLM is imported only when the first `translate()` call builds the engine, so that configuring
the workflow, or a rerun that finds every direction done, costs no import.

Decoding defaults to greedy with seed 0, and nothing stops a generation before end-of-sequence
or `max_tokens`: no stop strings, so multi-line outputs stay whole. The sampling settings not
named here (repetition_penalty, top_p, ...) come from the model's `generation_config.json`, as
they do for a request to vLLM's OpenAI-compatible server that leaves them out, so that offline
and served runs of a model decode alike. `engine_args={"generation_config": "vllm"}` switches
those to vLLM's neutral values.

`deterministic=True` trades speed for run-to-run reproducibility on the same hardware and vLLM
version (see `enable_reproducible_execution` and `DETERMINISTIC_ENGINE_ARGS`).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vllm import LLM, RequestOutput, SamplingParams

log = logging.getLogger(__name__)
# vLLM otherwise installs logging handlers of its own when imported, after which the job's
# log file (bouquet_eval.jobs.job_logging) stops receiving anything; its records then go
# through the job's handlers like everyone else's.
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

# Engine arguments of deterministic mode. Eager execution: which kernels run no longer depends
# on torch.compile's cache and autotuning or on the batch sizes captured as CUDA graphs.
# No prefix caching: a prompt whose prefix an earlier request left in the cache is computed in
# other pieces, hence with other rounding, so its output would depend on what ran before it
# (on the order of directions, or on where a resumed run starts).
DETERMINISTIC_ENGINE_ARGS: dict[str, Any] = {"enforce_eager": True, "enable_prefix_caching": False}


@dataclass
class GenerationStats:
    """Totals over every `translate()` call of one translator."""

    prompts: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    finish_reasons: Counter[str] = field(default_factory=Counter)

    def add(self, outputs: Sequence[RequestOutput]) -> None:
        for output in outputs:
            completion = output.outputs[0]
            self.prompts += 1
            self.prompt_tokens += len(output.prompt_token_ids or ())
            self.generated_tokens += len(completion.token_ids)
            self.finish_reasons[str(completion.finish_reason)] += 1


def enable_reproducible_execution() -> None:
    """Set the switches that vLLM reads only from the environment; before the engine exists.

    They stay set for the rest of the process, whose engines they all govern.
    """
    # vLLM's documented recipe for reproducible offline runs: with the engine core in this
    # process, requests are scheduled exactly in the order given rather than as they arrive
    # over a socket, so batches are composed the same way every run.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        log.warning(
            "vLLM has no batch-invariant kernels for CPU: reproducibility rests on the "
            "in-process scheduler alone"
        )
    else:
        # Kernels whose results do not depend on how many other sequences share the batch.
        os.environ["VLLM_BATCH_INVARIANT"] = "1"


class VLLMTranslator:
    """A `Translator` backed by one `vllm.LLM`, built on the first `translate()` call.

    `stats` accumulates prompt and generated token counts and finish reasons across calls.
    `engine_args` goes to `vllm.LLM` as is (e.g. `kv_cache_memory_bytes`, `enforce_eager`);
    it may not repeat the named arguments, nor contradict `deterministic`.
    """

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        max_tokens: int = 512,
        temperature: float = 0.0,
        seed: int = 0,
        deterministic: bool = False,
        system_prompt: str | None = None,
        engine_args: dict[str, Any] | None = None,
    ) -> None:
        # Checked here because the engine, which would reject them too, takes minutes to load.
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must not be negative, not {temperature}")
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.deterministic = deterministic
        self.system_prompt = system_prompt
        self.engine_arguments = combine_engine_arguments(
            {
                "model": model,
                "revision": revision,
                "tensor_parallel_size": tensor_parallel_size,
                "dtype": dtype,
                "max_model_len": max_model_len,
                "gpu_memory_utilization": gpu_memory_utilization,
                "seed": seed,
            },
            engine_args or {},
            deterministic,
        )
        self.stats = GenerationStats()
        self._llm: LLM | None = None

    def translate(self, prompts: list[str]) -> list[str]:
        if not prompts:
            return []
        outputs = self.engine().chat(
            [self.conversation(prompt) for prompt in prompts],
            self.sampling_params(),
            use_tqdm=False,
        )
        self.stats.add(outputs)
        return [output.outputs[0].text for output in outputs]

    def conversation(self, prompt: str) -> list[dict[str, str]]:
        system = [] if self.system_prompt is None else [self.system_prompt]
        return [{"role": "system", "content": text} for text in system] + [
            {"role": "user", "content": prompt}
        ]

    def sampling_params(self) -> SamplingParams:
        from vllm import SamplingParams

        model_defaults = self.engine().model_config.get_diff_sampling_param()
        return SamplingParams(
            **{
                **model_defaults,
                "temperature": self.temperature,
                "seed": self.seed,
                "max_tokens": self.max_tokens,
            }
        )

    def engine(self) -> LLM:
        """The translator's engine, built on first use."""
        if self._llm is None:
            if self.deterministic:
                enable_reproducible_execution()
            from vllm import LLM

            log.info("starting vLLM for %s", self.engine_arguments["model"])
            self._llm = LLM(**self.engine_arguments)
        return self._llm


def combine_engine_arguments(
    named: dict[str, Any], extra: dict[str, Any], deterministic: bool
) -> dict[str, Any]:
    repeated = sorted(named.keys() & extra.keys())
    if repeated:
        raise ValueError(
            f"engine_args sets {', '.join(repeated)}: pass them as arguments of VLLMTranslator"
        )
    if not deterministic:
        return {**named, **extra}
    contradicted = sorted(
        key for key, value in DETERMINISTIC_ENGINE_ARGS.items() if extra.get(key, value) != value
    )
    if contradicted:
        raise ValueError(
            f"engine_args sets {', '.join(contradicted)} against deterministic=True, which "
            f"needs {DETERMINISTIC_ENGINE_ARGS}"
        )
    return {**named, **DETERMINISTIC_ENGINE_ARGS, **extra}
