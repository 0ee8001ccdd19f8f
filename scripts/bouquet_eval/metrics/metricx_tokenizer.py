"""MetricX-24's tokenizer, built from `spiece.model` the way the official pipeline builds it.

google-research/metricx's `predict.py` pins transformers 4.30.2, whose `AutoTokenizer` turns an
mT5 `spiece.model` into a fast (`tokenizers`) T5 tokenizer: nmt-NFKC normalisation from the
model's precompiled character map, runs of spaces collapsed to one, a `▁` prefixed to every
piece of text between special tokens, a unigram model over the sentencepiece vocabulary, and
`</s>` appended. That tokenizer keeps a final `▁` for text ending in whitespace and puts one
before a literal `</s>` in the text; transformers 5's T5Tokenizer does neither, and the scores
move by points. So the same pipeline is built here with the `tokenizers` library, and a test
checks its ids against transformers 4.30.2 itself (tests/test_metricx_tokenization.py).

`tokenizers` is imported when a tokenizer is built, not when this module is.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

SPIECE, CONFIG = "spiece.model", "tokenizer_config.json"
SCHEME = "t5fast-hf4.30.2"
"""Names the tokenization in the metric's signature: scores from another one are stale."""

T5_SPECIAL_TOKENS = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}
DEFAULT_EXTRA_IDS = 100
"""T5Tokenizer's default when tokenizer_config.json does not say; google/mt5-xl says 0, its
sentinels being pieces of `spiece.model` itself (`▁<extra_id_0>` ... at the end, reversed)."""
SCORE_PIECES = ("▁<extra_id_10>", "<extra_id_10>")
"""MetricX reads the logit of mT5's id 250089, the spiece.model piece `▁<extra_id_10>`; a
T5-layout tokenizer (extra_ids > 0) has an added `<extra_id_10>` token instead."""


@dataclass(frozen=True)
class TokenizerFiles:
    spiece: bytes
    config: dict[str, Any]
    """tokenizer_config.json, or {} when there is none."""
    config_path: str
    """Where the configuration was looked for, for error messages."""


def tokenizer_files(name: str) -> TokenizerFiles:
    """`spiece.model` and `tokenizer_config.json` of a local folder or a hub repository."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        # The two files only; offline, the cached snapshot that `prefetch` filled.
        folder = Path(snapshot_download(name, allow_patterns=[SPIECE, CONFIG]))
    spiece, config = folder / SPIECE, folder / CONFIG
    if not spiece.is_file():
        raise FileNotFoundError(f"metricx tokenizer: {name} has no {SPIECE}")
    if (folder / "tokenizer.json").exists():
        log.warning(
            "metricx tokenizer: %s is not used; the tokenizer is built from %s",
            folder / "tokenizer.json",
            SPIECE,
        )
    try:
        settings = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except json.JSONDecodeError as error:
        raise ValueError(f"{config}: not valid JSON ({error})") from error
    return TokenizerFiles(spiece=spiece.read_bytes(), config=settings, config_path=str(config))


def extra_id_tokens(files: TokenizerFiles) -> list[str]:
    """The `<extra_id_N>` special tokens T5Tokenizer adds on top of the sentencepiece vocabulary,
    in vocabulary order (the highest N first); none for mT5's layout."""
    config = files.config
    for key, expected in T5_SPECIAL_TOKENS.items():
        if config.get(key, expected) != expected:
            raise ValueError(
                f"{files.config_path}: {key} is {config[key]!r}; MetricX's tokenizer uses "
                f"T5's {expected!r}"
            )
    count = config.get("extra_ids", DEFAULT_EXTRA_IDS)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(
            f"{files.config_path}: extra_ids must be a whole number >= 0, not {count!r}"
        )
    tokens = [f"<extra_id_{index}>" for index in reversed(range(count))]
    additional = config.get("additional_special_tokens") or []
    if not set(additional) <= set(tokens):
        unknown = sorted(set(additional) - set(tokens))
        raise ValueError(
            f"{files.config_path}: additional_special_tokens {unknown} are not among the "
            f"{count} extra ids; such a tokenizer is not MetricX's"
        )
    return tokens


def build_tokenizer(files: TokenizerFiles, max_length: int) -> Tokenizer:
    """The fast T5 tokenizer of transformers 4.30.2 for these files, cutting at `max_length`
    tokens (the final `</s>` included), as `tokenizer(text, max_length=..., truncation=True)`."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers
    from tokenizers.processors import TemplateProcessing

    # Protobuf makes the message classes of a generated module at import: no stub names them.
    proto = sentencepiece_model_pb2.ModelProto.FromString(files.spiece)  # type: ignore[attr-defined]
    extra_ids = extra_id_tokens(files)
    vocabulary = [(piece.piece, piece.score) for piece in proto.pieces]
    vocabulary += [(token, 0.0) for token in extra_ids]
    # 4.30.2 ignores the model's byte_fallback, add_dummy_prefix and remove_extra_whitespaces
    # flags: it always prefixes `▁` and only collapses runs of spaces, never trims them.
    tokenizer = Tokenizer(models.Unigram(vocabulary, proto.trainer_spec.unk_id, False))
    collapse = normalizers.Replace(Regex(" {2,}"), " ")
    charsmap = proto.normalizer_spec.precompiled_charsmap
    tokenizer.normalizer = (
        normalizers.Sequence([normalizers.Precompiled(charsmap), collapse])
        if charsmap
        else normalizers.Sequence([collapse])
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    eos = T5_SPECIAL_TOKENS["eos_token"]
    tokenizer.post_processor = TemplateProcessing(
        single=f"$A {eos}", special_tokens=[(eos, proto.trainer_spec.eos_id)]
    )
    # Matched in the raw text before normalisation, as transformers adds special tokens.
    specials = ["<pad>", eos, "<unk>", *extra_ids]
    tokenizer.add_special_tokens(
        [AddedToken(token, normalized=False, special=True) for token in specials]
    )
    tokenizer.enable_truncation(max_length)
    return tokenizer


def score_token_id(tokenizer: Tokenizer, name: str) -> int:
    """The id whose logit is MetricX's score."""
    for piece in SCORE_PIECES:
        token_id = tokenizer.token_to_id(piece)
        if token_id is not None:
            return token_id
    raise ValueError(f"metricx: tokenizer {name} has neither of {list(SCORE_PIECES)}")
