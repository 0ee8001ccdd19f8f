"""Tiny random SONAR text encoder and BLASER 2.0 checkpoints, built offline.

Each is laid out as the workflow reads a local model (bouquet_eval.metrics.blaser): the encoder
folder holds `sonar_text_encoder.pt` and `sentencepiece.source.256000.model` (a SentencePiece
model trained here on the bundled sample, in NLLB's layout), a BLASER folder `model.pt`, and
each its `model_config.yaml` (the fairseq2 `model_config` of its tiny shape). `cards/` holds
fairseq2 asset cards naming the same files (`tiny_sonar_encoder`, `tiny_blaser_ref`,
`tiny_blaser_qe`, each based on sonar-space's own card), through which sonar-space's README
pipeline loads them by name (tests/blaser_reference.py).

Needs the BLASER environment (sonar-space, and sentencepiece to train the tokenizer).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from bouquet_eval.metrics.blaser import CHECKPOINT_FILE, ENCODER_CARD, ENCODER_FILES, MODEL_CONFIG

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "parquet"
ENCODER_SHAPE = {
    "model_dim": 16,
    "num_encoder_layers": 2,
    "num_decoder_layers": 2,
    "num_encoder_attn_heads": 2,
    "num_decoder_attn_heads": 2,
    "ffn_inner_dim": 32,
}
BLASER_SHAPE = {"embedding_dim": 16, "hidden_dims": [24, 12]}
CARDS = {"blaser": "blaser_2_0_ref", "blaser_qe": "blaser_2_0_qe"}
"""sonar-space's card of each metric's model, which the tiny cards `tiny_blaser_ref` and
`tiny_blaser_qe` are based on."""
WEIGHT_SCALE = 4.0
"""BLASER's random weights are scaled up so that its scores spread over the sentences (at their
initial scale every sentence scores about the same, and a sentence scored in another's place
would go unnoticed)."""


def train_tokenizer(path: Path, vocab_size: int = 1000) -> None:
    """A SentencePiece model of the sample's sentences, with NLLB's special pieces (<unk> 0,
    <s> 1, </s> 2, no <pad>: fairseq2 inserts it, and the language codes, as it loads it)."""
    import sentencepiece as spm

    frames = [pd.read_parquet(file) for file in sorted(SAMPLE.glob("*.parquet"))]
    sentences = sorted(
        {text for frame in frames for column in ("src_text", "tgt_text") for text in frame[column]}
    )
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    path.write_bytes(model.getvalue())


def build_all(folder: Path, released: bool = False) -> dict[str, Path]:
    """The encoder, `blaser` and `blaser_qe` folders and the cards' folder, by name.
    `released`: of the released models' shapes (sonar-space's own architectures, about 3 GB
    for the encoder), with no model_config.yaml; the tokenizer is the tiny one still."""
    import torch
    from fairseq2.assets import AssetCard, get_asset_store
    from fairseq2.data.tokenizers import load_tokenizer
    from fairseq2.models import ModelHubAccessor
    from sonar.models.blaser import BLASER_FAMILY, BlaserConfig, BlaserModel
    from sonar.models.sonar_text import (
        SONAR_TEXT_ENCODER_FAMILY,
        SonarTextEncoderConfig,
        SonarTextTransformerEncoderModel,
    )

    store = get_asset_store()
    encoder = folder / "encoder"
    encoder.mkdir(parents=True)
    checkpoint, tokenizer_file = (encoder / name for name in ENCODER_FILES)
    train_tokenizer(tokenizer_file)
    base = store.retrieve_card(ENCODER_CARD)
    vocabulary = load_tokenizer(AssetCard("tiny", {"tokenizer": tokenizer_file.as_uri()}, base))
    # The released encoder's special indices (its checkpoint's, which the tokenizer's differ
    # from: sonar-space's own configuration), with the tiny vocabulary's size.
    shape: dict[str, Any] = (
        {}
        if released
        else {
            **ENCODER_SHAPE,
            "vocab_info": {
                "size": vocabulary.vocab_info.size,
                "unk_idx": 1,
                "bos_idx": 2,
                "eos_idx": 3,
                "pad_idx": 1,
            },
        }
    )
    encoders = ModelHubAccessor(
        SONAR_TEXT_ENCODER_FAMILY, SonarTextTransformerEncoderModel, SonarTextEncoderConfig
    )()
    config = encoders.get_model_config(AssetCard("tiny", _config(shape), base))
    torch.manual_seed(41)
    model = encoders.create_new_model(config)
    torch.save({"model": model.state_dict()}, checkpoint)
    _write_config(encoder, shape)
    cards = [_card("tiny_sonar_encoder", ENCODER_CARD, checkpoint, shape, tokenizer_file)]

    blasers = ModelHubAccessor(BLASER_FAMILY, BlaserModel, BlaserConfig)()
    built = {"encoder": encoder}
    for name, card in CARDS.items():
        blaser_folder = folder / name
        blaser_folder.mkdir()
        blaser_shape = {} if released else BLASER_SHAPE
        blaser_card = AssetCard("tiny", _config(blaser_shape), store.retrieve_card(card))
        torch.manual_seed(len(name))
        blaser = blasers.create_new_model(blasers.get_model_config(blaser_card))
        with torch.no_grad():
            for parameter in blaser.parameters():
                parameter.mul_(WEIGHT_SCALE)
        torch.save({"model": blaser.state_dict()}, blaser_folder / CHECKPOINT_FILE)
        _write_config(blaser_folder, blaser_shape)
        tiny = f"tiny_blaser_{card.removeprefix('blaser_2_0_')}"
        cards.append(_card(tiny, card, blaser_folder / CHECKPOINT_FILE, blaser_shape))
        built[name] = blaser_folder
    built["cards"] = folder / "cards"
    built["cards"].mkdir()
    (built["cards"] / "tiny.yaml").write_text(yaml.safe_dump_all(cards), encoding="utf-8")
    return built


def _config(shape: dict[str, Any]) -> dict[str, Any]:
    """The card fields of a model of `shape` (none for the released shape)."""
    return {"model_config": {"_set_": shape}} if shape else {}


def _write_config(folder: Path, shape: dict[str, Any]) -> None:
    if shape:
        (folder / MODEL_CONFIG).write_text(yaml.safe_dump({"_set_": shape}), encoding="utf-8")


def _card(
    name: str, base: str, checkpoint: Path, shape: dict[str, Any], tokenizer: Path | None = None
) -> dict[str, Any]:
    card: dict[str, Any] = {"name": name, "base": base, "checkpoint": checkpoint.as_uri()}
    card.update(_config(shape))
    if tokenizer is not None:
        card["tokenizer"] = tokenizer.as_uri()
    return card
