"""A tiny random mT5 and sentencepiece tokenizer laid out like a MetricX checkpoint, offline.

The tokenizer is trained here on generated pseudo-words in several scripts, with the T5 id
layout (pad 0, eos 1, unk 2, no bos), and laid out as google/mt5-xl's is: its 100 sentinels are
user-defined pieces `▁<extra_id_99>` ... `▁<extra_id_0>` at the end of `spiece.model` itself,
and tokenizer_config.json says `extra_ids: 0`. So `▁<extra_id_10>` is the 11th id from the end,
as mT5's 250089 is. The model's `lm_head` gets weights of its own, as the released MetricX
checkpoints do; `tied=True` builds the broken variant instead.
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A handful of letters per script: enough for every script to get pieces of its own while the
# vocabulary stays a few hundred tokens.
ALPHABETS = {
    "latin": "abcdefghiklmnoprstuvyz",
    "cyrillic": "абвгдежзиклмнопрстуфя",
    "arabic": "ابتثجحخدرزسشصطعفقكلمنهوي",
    "han": "水火山木日月人口心手目耳田雨雪風花鳥魚馬",
    "devanagari": "कखगघचजटडतदनपबमयरलवसह",
    "emoji": "🙂🚀🌍🎉🔥🍎📚",
}
MATRAS = "ािीुूेैोौ"
PROMPT_WORDS = ("source:", "candidate:", "reference:")
TINY = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4)


@dataclass(frozen=True)
class TinyCheckpoint:
    model: Path
    tokenizer: Path


def pseudo_word(rng: random.Random, script: str) -> str:
    letters = ALPHABETS[script]
    if script in ("han", "emoji"):
        return "".join(rng.choice(letters) for _ in range(rng.randint(1, 3)))
    if script == "devanagari":
        return "".join(rng.choice(letters) + rng.choice(MATRAS) for _ in range(rng.randint(1, 3)))
    return "".join(rng.choice(letters) for _ in range(rng.randint(2, 8)))


def pseudo_sentence(rng: random.Random, words: int, scripts: tuple[str, ...] | None = None) -> str:
    """Words drawn from one script, or from a mix of them when `scripts` names several."""
    chosen = scripts or (rng.choice(sorted(ALPHABETS)),)
    return " ".join(pseudo_word(rng, rng.choice(chosen)) for _ in range(words))


def training_lines(rng: random.Random, count: int = 360) -> list[str]:
    lines = []
    for _ in range(count):
        lines.append(pseudo_sentence(rng, rng.randint(3, 12)))
        # The prompt keywords recur in every MetricX input, so they get pieces of their own.
        lines.append(" ".join(PROMPT_WORDS))
    return lines


def train_tokenizer(directory: Path, rng: random.Random, vocab_size: int) -> None:
    write_t5_sentencepiece(
        directory, training_lines(rng), vocab_size, extra_ids=0, sentinel_pieces=100
    )


def write_t5_sentencepiece(
    directory: Path,
    lines: list[str],
    vocab_size: int,
    extra_ids: int,
    symbols: tuple[str, ...] = (),
    sentinel_pieces: int = 0,
) -> None:
    """Train a T5-layout sentencepiece model (<pad> 0, </s> 1, <unk> 2, no <s>) into
    `directory`, with the tokenizer_config.json that makes AutoTokenizer load it.

    `extra_ids` sentinels are added by the tokenizer class on loading (T5's layout);
    `sentinel_pieces` are appended to the sentencepiece model itself, as the T5 library wrote
    mT5's (`▁<extra_id_N>`, user-defined, score 0, the highest N first).
    """
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type="unigram",
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        character_coverage=1.0,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        user_defined_symbols=list(symbols),
        num_threads=1,
        minloglevel=2,
    )
    # Protobuf makes the message classes of a generated module at import: no stub names them.
    proto = sentencepiece_model_pb2.ModelProto.FromString(model.getvalue())  # type: ignore[attr-defined]
    for index in reversed(range(sentinel_pieces)):
        proto.pieces.add(
            piece=f"▁<extra_id_{index}>",
            score=0.0,
            type=sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED,  # type: ignore[attr-defined]
        )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "spiece.model").write_bytes(proto.SerializeToString())
    config = {"tokenizer_class": "T5Tokenizer", "extra_ids": extra_ids}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def build_model(directory: Path, tokenizer: Any, size: dict[str, Any], tied: bool) -> None:
    import torch
    from transformers import MT5Config, MT5ForConditionalGeneration

    vocab_size = tokenizer.get_vocab_size()
    config = MT5Config(vocab_size=vocab_size, feed_forward_proj="gated-gelu", **size)
    model = MT5ForConditionalGeneration(config).eval()
    if not tied:
        # A head of its own, as the released checkpoints have, rather than the embeddings'.
        head = torch.randn(vocab_size, config.d_model) * config.d_model**-0.5
        model.lm_head.weight = torch.nn.Parameter(head)
        aim_score_row(model, tokenizer, random.Random(vocab_size))
    model.save_pretrained(directory)


def aim_score_row(model: Any, tokenizer: Any, rng: random.Random) -> None:
    """Set the `<extra_id_10>` row of lm_head so that scores spread around 12, a few beyond
    the [0, 25] clamp on either side.

    A random row gives scores in a narrow band (the decoder's state after the start token
    varies little from input to input), often all below 0, where every score clamps to 0.
    The row here scales the mean state to 12 and the direction in which states vary most,
    taken orthogonal to the mean so as not to shift it, to a standard deviation of 8.
    """
    import torch

    texts = [
        f"source: {pseudo_sentence(rng, 20)} candidate: {pseudo_sentence(rng, rng.randint(0, 20))}"
        for _ in range(64)
    ]
    tokenizer.enable_padding(pad_id=0)
    encoded = tokenizer.encode_batch(texts)
    tokenizer.no_padding()
    with torch.no_grad():
        states = model(
            input_ids=torch.tensor([encoding.ids for encoding in encoded]),
            attention_mask=torch.tensor([encoding.attention_mask for encoding in encoded]),
            decoder_input_ids=torch.zeros((len(texts), 1), dtype=torch.long),
            output_hidden_states=True,
        ).decoder_hidden_states[-1][:, 0]
        mean = states.mean(0)
        direction = torch.linalg.svd(states - mean, full_matrices=False).Vh[0]
        direction -= direction.dot(mean) / mean.dot(mean) * mean
        spread = ((states - mean) @ direction).std()
        row = 12 * mean / mean.dot(mean) + 8 * direction / spread
        model.lm_head.weight[tokenizer.token_to_id("▁<extra_id_10>")] = row


def build_tiny_mt5(
    directory: Path,
    *,
    seed: int = 0,
    size: dict[str, Any] | None = None,
    tied: bool = False,
    pieces: int = 150,
) -> TinyCheckpoint:
    """Write `<directory>/tokenizer` and `<directory>/model`; the same seed gives the same files."""
    import torch

    from bouquet_eval.metrics.metricx_tokenizer import build_tokenizer, tokenizer_files

    rng = random.Random(seed)
    torch.manual_seed(seed)
    checkpoint = TinyCheckpoint(model=directory / "model", tokenizer=directory / "tokenizer")
    train_tokenizer(checkpoint.tokenizer, rng, pieces)
    tokenizer = build_tokenizer(tokenizer_files(str(checkpoint.tokenizer)), max_length=1536)
    build_model(checkpoint.model, tokenizer, size or TINY, tied)
    return checkpoint
