"""Translating with vLLM's offline engine (`vllm.LLM`), many directions as one stream.

Each prompt becomes a one-turn chat (after an optional system message) rendered by the model's
own chat template. `translate_batches` keeps the engine full across direction boundaries: it
adds the next direction's requests to the engine's queue (`LLM.enqueue_chat`) whenever fewer
than twice the engine's sequence limit are unfinished, steps the engine itself
(`llm_engine.step()`), and hands each direction back as soon as its last output is done. One
`LLM.chat` per direction would instead let the batch drain to its longest output, then render
and prefill the next direction while the accelerator waits (benchmarks/engine_stream.py).
`translate` is a stream of one batch. Outputs are returned raw: stripping reasoning is the
caller's job.

vLLM is imported only when the engine is built (`load`, or the first batch), so that
configuring the workflow, or a rerun that finds every direction done, costs no import.

Decoding defaults to greedy with seed 0, and nothing stops a generation before end-of-sequence
or `max_tokens`: no stop strings, so multi-line outputs stay whole. The sampling settings not
named here (repetition_penalty, top_p, ...) come from the model's `generation_config.json`, as
they do for a request to vLLM's OpenAI-compatible server that leaves them out, so that offline
and served runs of a model decode alike. `engine_args={"generation_config": "vllm"}` switches
those to vLLM's neutral values.

`deterministic=True` trades speed for run-to-run reproducibility on the same hardware and vLLM
version (see `enable_reproducible_execution` and `DETERMINISTIC_ENGINE_ARGS`); the outputs then
do not depend on which other directions share the engine.

When stderr is a terminal, a progress bar like vLLM's own shows the prompts done and the
tokens per second.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vllm import LLM, RequestOutput, SamplingParams

log = logging.getLogger(__name__)
# vLLM otherwise installs logging handlers of its own when imported, after which the job's
# log file (bouquet_eval.core.jobs.job_logging) stops receiving anything; its records then go
# through the job's handlers like everyone else's.
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

# Engine arguments of deterministic mode. Eager execution: which kernels run no longer depends
# on torch.compile's cache and autotuning or on the batch sizes captured as CUDA graphs.
# No prefix caching: a prompt whose prefix an earlier request left in the cache is computed in
# other pieces, hence with other rounding, so its output would depend on what ran before it
# (on the order of directions, or on where a resumed run starts).
DETERMINISTIC_ENGINE_ARGS: dict[str, Any] = {"enforce_eager": True, "enable_prefix_caching": False}


# The engine's queue is kept this many times its sequence limit deep: a step then never lacks
# requests to schedule while the next batch is rendered and added.
QUEUE_DEPTH = 2


@dataclass
class GenerationStats:
    """Totals over every batch of one translator.

    A batch's prompts, tokens and finish reasons are counted when its last output is done, so
    that the counts between two finished batches are exactly the later batch's; `engine_steps`
    counts every step of the engine as it is taken.
    """

    prompts: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    engine_steps: int = 0
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
    """A `BatchTranslator` backed by one `vllm.LLM`, built by `load()` or on first use.

    `stats` accumulates prompt and generated token counts, engine steps and finish reasons.
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
            return []  # without building an engine for nothing
        for _, translations in self.translate_batches([prompts]):
            return translations
        return []

    def translate_batches(
        self, batches: Iterable[list[str]]
    ) -> Generator[tuple[int, list[str]], None, None]:
        """See `bouquet_eval.translators.BatchTranslator`: one engine, kept full across batches.

        Closing the iterator early aborts the requests still in the engine.
        """
        llm = self.engine()
        engine = llm.llm_engine
        defaults = self.sampling_params()
        depth = QUEUE_DEPTH * engine.vllm_config.scheduler_config.max_num_seqs
        source = enumerate(batches)
        exhausted = False
        # Request id -> (batch, position in it); outputs of each unfinished batch, and how
        # many it still lacks.
        slots: dict[str, tuple[int, int]] = {}
        outputs: dict[int, list[RequestOutput | None]] = {}
        missing: dict[int, int] = {}
        bar = ProgressBar.on_terminal()
        try:
            while True:
                while not exhausted and len(slots) < depth:
                    index, prompts = next(source, (-1, None))
                    if prompts is None:
                        exhausted = True
                    elif not prompts:
                        yield index, []
                    else:
                        requests = llm.enqueue_chat(
                            [self.conversation(prompt) for prompt in prompts],
                            self.request_params(prompts, defaults),
                            use_tqdm=False,
                        )
                        for position, request in enumerate(requests):
                            slots[external_request_id(request)] = (index, position)
                        outputs[index] = [None] * len(prompts)
                        missing[index] = len(prompts)
                        if bar is not None:
                            bar.add(len(prompts))
                if not slots:
                    return
                finished = [output for output in engine.step() if output.finished]
                self.stats.engine_steps += 1
                for output in finished:
                    index, position = slots.pop(output.request_id)
                    outputs[index][position] = output
                    missing[index] -= 1
                    if bar is not None:
                        bar.finished(output)
                    if missing[index] == 0:
                        del missing[index]
                        batch = [done for done in outputs.pop(index) if done is not None]
                        self.stats.add(batch)
                        yield index, [done.outputs[0].text for done in batch]
        finally:
            if slots:
                engine.abort_request(list(slots))
            if bar is not None:
                bar.close()

    def request_params(
        self, prompts: list[str], defaults: SamplingParams
    ) -> SamplingParams | list[SamplingParams]:
        """The sampling parameters of a batch's requests: `defaults` for every prompt. A
        subclass may vary them per prompt (benchmarks/engine_stream.py does)."""
        return defaults

    def load(self) -> None:
        """Build the engine now, so that its load is timed apart from the first batch."""
        self.engine()

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


def external_request_id(request_id: str) -> str:
    """The id a request's outputs carry, from the one `LLM.enqueue_chat` returns.

    The engine appends "-" and 8 random characters to the id `LLM` gives a request (a counter)
    unless VLLM_DISABLE_REQUEST_ID_RANDOMIZATION is set; outputs carry the id without them.
    """
    return request_id.rpartition("-")[0] or request_id


class ProgressBar:
    """The bar `LLM.generate` shows (prompts done, input and output tokens per second), for
    a stream whose total grows as batches are added."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self.bar: tqdm = tqdm(total=0, desc="Processed prompts", dynamic_ncols=True)
        self.prompt_tokens = 0
        self.output_tokens = 0

    @classmethod
    def on_terminal(cls) -> ProgressBar | None:
        """A bar when stderr is a terminal, where tqdm draws it; else None."""
        return cls() if sys.stderr.isatty() else None

    def add(self, prompts: int) -> None:
        self.bar.total += prompts
        self.bar.refresh()

    def finished(self, output: RequestOutput) -> None:
        self.prompt_tokens += len(output.prompt_token_ids or ())
        self.output_tokens += len(output.outputs[0].token_ids)
        elapsed = self.bar.format_dict["elapsed"] or 1e-9
        self.bar.set_postfix_str(
            f"est. speed input: {self.prompt_tokens / elapsed:.2f} toks/s, "
            f"output: {self.output_tokens / elapsed:.2f} toks/s",
            refresh=False,
        )
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


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
