"""Tiny random COMET checkpoints of the three released shapes, built offline.

Each is laid out as its Hub repository is (`checkpoints/model.ckpt`, `hparams.yaml` beside
`checkpoints/`) and loads through unbabel-comet's own `load_from_checkpoint`:

- "comet": COMET-22's shape (`regression_metric`, XLM-R encoder, with a reference), as
  Unbabel/wmt22-comet-da;
- "cometkiwi": CometKiwi's (`unified_metric` reading the translation and the source only), as
  Unbabel/wmt22-cometkiwi-da;
- "xcomet": xCOMET's (`xcomet_metric`, XLM-R XL encoder, sentence score and error spans), as
  Unbabel/XCOMET-XL.

Their encoder (`pretrained_model`) is a folder written here: an XLM-R tokenizer whose
sentencepiece model is trained on the bundled sample's sentences, and a small config. COMET
reads only the tokenizer and config from it (the weights come from the checkpoint), as it
reads xlm-roberta-large's from the Hugging Face cache for the released models. Needs the
COMET environment (transformers 4).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
SENTENCES = REPOSITORY / "data" / "sample" / "sentences.yaml"
SHAPES = ("comet", "cometkiwi", "xcomet")
LAYERS = 2
HIDDEN = 32
TINY_ENCODER: dict[str, Any] = dict(
    hidden_size=HIDDEN,
    num_hidden_layers=LAYERS,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=514,
    # Larger than XLM-R's 0.02, so that random sentence embeddings differ as much as trained
    # ones do: at 0.02 CometKiwi's scores all lie within 1e-4 of each other.
    initializer_range=0.5,
)


@dataclass(frozen=True)
class ShapeSpec:
    class_name: str
    encoder_model: str
    settings: dict[str, Any]


# Each shape's own hyper-parameters as its released hparams.yaml has them, sizes made tiny.
# CometKiwi's and xCOMET's (both unified metrics) in common:
UNIFIED: dict[str, Any] = dict(
    sent_layer="mix", layer_transformation="sparsemax", word_layer=LAYERS, hidden_sizes=[48, 16]
)
SPECS = {
    "comet": ShapeSpec(
        "RegressionMetric",
        "XLM-RoBERTa",
        dict(layer="mix", layer_transformation="sparsemax", pool="avg", hidden_sizes=[48]),
    ),
    "cometkiwi": ShapeSpec(
        "UnifiedMetric",
        "XLM-RoBERTa",
        {**UNIFIED, "input_segments": ["mt", "src"], "word_level_training": False},
    ),
    "xcomet": ShapeSpec(
        "XCOMETMetric",
        "XLM-RoBERTa-XL",
        {
            **UNIFIED,
            "word_level_training": True,
            "error_labels": ["minor", "major", "critical"],
        },
    ),
}


def sample_texts() -> list[str]:
    document = yaml.safe_load(SENTENCES.read_text(encoding="utf-8"))
    return [text for sentence in document["sentences"] for text in sentence["texts"].values()]


def build_encoder(
    directory: Path, xl: bool, vocab_size: int = 1000, config: dict[str, Any] | None = None
) -> Path:
    """An XLM-R tokenizer trained on the sample's sentences and a config, as a folder: the
    tiny one unless `config` gives the encoder's settings (benchmarks give released sizes)."""
    import importlib

    import sentencepiece as spm

    # transformers 4, as the COMET environment has it; the type checker knows version 5's names.
    transformers: Any = importlib.import_module("transformers")

    model = io.BytesIO()
    # XLM-R's sentencepiece layout: <unk> 0, <s> 1, </s> 2; the tokenizer adds <pad> and
    # shifts the rest by one, as fairseq did.
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sample_texts()),
        model_writer=model,
        model_type="unigram",
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    directory.mkdir(parents=True, exist_ok=True)
    spm_file = directory / "sentencepiece.bpe.model"
    spm_file.write_bytes(model.getvalue())
    tokenizer = transformers.XLMRobertaTokenizerFast(vocab_file=str(spm_file))
    tokenizer.save_pretrained(str(directory))
    config_class = transformers.XLMRobertaXLConfig if xl else transformers.XLMRobertaConfig
    settings = {"vocab_size": len(tokenizer), **(TINY_ENCODER if config is None else config)}
    config_class(pad_token_id=1, **settings).save_pretrained(str(directory))
    return directory


def build_checkpoint(
    directory: Path,
    shape: str,
    encoder: Path,
    seed: int = 0,
    settings: dict[str, Any] | None = None,
    device: str = "cpu",
    dtype: str = "float32",
) -> Path:
    """`<directory>/checkpoints/model.ckpt` and `<directory>/hparams.yaml` for `shape`;
    returns `directory`. The same seed gives the same weights. `settings` override the
    shape's hyper-parameters; `device` is where the weights are drawn (a GPU draws an XL's
    billions in a moment) and `dtype` how they are stored."""
    import comet.models
    import pytorch_lightning
    import torch

    spec = SPECS[shape]
    torch.manual_seed(seed)
    with torch.device(device):
        model = getattr(comet.models, spec.class_name)(
            encoder_model=spec.encoder_model,
            pretrained_model=str(encoder),
            load_pretrained_weights=False,
            local_files_only=True,
            **{**spec.settings, **(settings or {})},
        )
    hyper_parameters = dict(model.hparams)
    # What the released checkpoints record: loading flags are given when loading.
    for flag in ("load_pretrained_weights", "local_files_only"):
        hyper_parameters.pop(flag, None)
    (directory / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "state_dict": {
                name: tensor.to("cpu", getattr(torch, dtype))
                if tensor.is_floating_point()
                else tensor.cpu()
                for name, tensor in model.state_dict().items()
            },
            "hyper_parameters": hyper_parameters,
            "pytorch-lightning_version": pytorch_lightning.__version__,
        },
        directory / "checkpoints" / "model.ckpt",
    )
    (directory / "hparams.yaml").write_text(yaml.safe_dump(hyper_parameters), encoding="utf-8")
    return directory


def build_all(directory: Path) -> dict[str, Path]:
    """Every shape's checkpoint folder under `directory`, by shape name."""
    encoders = {
        xl: build_encoder(directory / f"encoder-{'xlmr-xl' if xl else 'xlmr'}", xl)
        for xl in (False, True)
    }
    return {
        shape: build_checkpoint(
            directory / shape, shape, encoders[SPECS[shape].encoder_model.endswith("XL")]
        )
        for shape in SHAPES
    }
