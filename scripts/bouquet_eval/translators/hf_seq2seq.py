"""Hugging Face encoder-decoder translators: NLLB-200, MADLAD-400 and Aya-101.

The runner hands a translator prompts, not languages, so each model family comes with a prompt
function that puts what the model needs into the prompt, in the model's own language codes:

- NLLB-200 (`NLLBTranslator` + `nllb_prompt`): "<src code>\\t<tgt code>\\t<text>"; the translator
  sets the tokenizer's `src_lang` and forces the target code as the first generated token.
- MADLAD-400 (`MadladTranslator` + `madlad_prompt`): "<2xx> <text>", the model's native input.
- Aya-101 (`AyaTranslator` + the default `bouquet_eval.translators.prompt.build_prompt`): an
  instruction.

Every translator has `check_directions(directions)`, which raises `UnsupportedLanguageError`
naming every language the model cannot translate from or into, without loading the model: NLLB
and MADLAD look for the language tokens in the tokenizer (which they load), Aya looks the
language up in its model card's list (langcodes only). NLLB's and MADLAD's `translate` check
the languages of their prompts again before the model loads. The model loads on the first
`translate` call, once; torch and transformers are imported only then or by a tokenizer load,
so building a translator is cheap.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from bouquet_eval.core.devices import resolve_device, resolve_dtype
from bouquet_eval.core.languages import LanguageCode

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

__all__ = [
    "AyaTranslator",
    "LanguagePair",
    "MadladTranslator",
    "NLLBTranslator",
    "Seq2SeqTranslator",
    "UnsupportedLanguageError",
    "aya_supports",
    "length_sorted_batches",
    "madlad_code",
    "madlad_prompt",
    "nllb_code",
    "nllb_prompt",
    "split_code",
]

DTYPES = ("float32", "bfloat16", "float16")
# `translate_batches` sorts at least this many batches' worth of prompts together.
WINDOW_BATCHES = 64

# BOUQuET codes that NLLB-200 spells differently. Everything else is used as it is, without
# its glottocode (NLLB has one Portuguese, `por_Latn`, and one Twi, `twi_Latn`).
NLLB_CODE_DIFFERENCES = {
    # BOUQuET names Mandarin (cmn); NLLB names the macrolanguage Chinese (zho).
    "cmn_Hans": "zho_Hans",
    "cmn_Hant": "zho_Hant",
    # Korean: BOUQuET's script is Kore (Hangul with Han), NLLB's Hang (Hangul).
    "kor_Kore": "kor_Hang",
    # Standard Estonian (ekk) is NLLB's est.
    "ekk_Latn": "est_Latn",
    # Macrolanguage codes, should a dataset use them, for the variety NLLB covers.
    "ara_Arab": "arb_Arab",
    "fas_Arab": "pes_Arab",
    "msa_Latn": "zsm_Latn",
    "swa_Latn": "swh_Latn",
    "lav_Latn": "lvs_Latn",
    "nep_Deva": "npi_Deva",
    "mon_Cyrl": "khk_Cyrl",
    "sqi_Latn": "als_Latn",
    "aze_Latn": "azj_Latn",
    "uzb_Latn": "uzn_Latn",
    "pus_Arab": "pbt_Arab",
    "mlg_Latn": "plt_Latn",
    "orm_Latn": "gaz_Latn",
    "ori_Orya": "ory_Orya",
    "yid_Hebr": "ydd_Hebr",
    "fil_Latn": "tgl_Latn",
}
_NLLB_CODE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")
_NLLB_PROMPT = re.compile(rf"^({_NLLB_CODE.pattern})\t({_NLLB_CODE.pattern})\t(.*)\Z", re.DOTALL)

# Individual languages whose macrolanguage langcodes does not know (it has Southern Pashto as
# a language of its own, written in Latin).
_MACROLANGUAGES = {"pbt": "ps"}
# Where MADLAD-400 departs from ISO 639-1: it has Norwegian as `no`, not Bokmål `nb`.
MADLAD_CODE_DIFFERENCES = {"nb": "no"}
_MADLAD_TOKEN = re.compile(r"^<2([^<>\s]+)>")

# The languages on the Aya-101 model card (ISO 639-3, macrolanguages where they apply).
# fmt: off
AYA_LANGUAGES = frozenset((
    "afr", "amh", "ara", "aze", "bel", "ben", "bul", "cat", "ceb", "ces", "cym", "dan", "deu",
    "ell", "eng", "epo", "est", "eus", "fil", "fin", "fra", "fry", "gla", "gle", "glg", "guj",
    "hat", "hau", "heb", "hin", "hun", "hye", "ibo", "ind", "isl", "ita", "jav", "jpn", "kan",
    "kat", "kaz", "khm", "kir", "kor", "kur", "lao", "lat", "lav", "lit", "ltz", "mal", "mar",
    "mkd", "mlg", "mlt", "mon", "mri", "msa", "mya", "nep", "nld", "nor", "nso", "nya", "ory",
    "pan", "pes", "pol", "por", "pus", "ron", "rus", "sin", "slk", "slv", "smo", "sna", "snd",
    "som", "sot", "spa", "sqi", "srp", "sun", "swa", "swe", "tam", "tel", "tgk", "tha", "tur",
    "twi", "ukr", "urd", "uzb", "vie", "xho", "yid", "yor", "zho", "zul",
))
# fmt: on
# CLDR's language-matching distance: 10 and below admits varieties a user would accept for the
# language (Egyptian Arabic for Arabic 10, Dari for Persian 4, Bokmål for Norwegian 1) but not
# Moroccan Arabic (14), Nynorsk (20) or Croatian for Serbian (59).
AYA_MAX_DISTANCE = 10


class UnsupportedLanguageError(ValueError):
    """Some languages cannot be translated from or into with this model."""

    def __init__(self, model: str, unsupported: dict[str, str]) -> None:
        self.unsupported = unsupported
        listed = ", ".join(
            code if model_code == code else f"{code} (as {model_code})"
            for code, model_code in sorted(unsupported.items())
        )
        super().__init__(
            f"model '{model}' does not support {len(unsupported)} language(s): {listed}. "
            "Leave them out of the directions (directions.src_langs, tgt_langs or list)."
        )


class LanguagePair(Protocol):
    """A direction: `bouquet_eval.data.dataset.Direction` or anything with the same two fields."""

    @property
    def src_lang(self) -> str: ...

    @property
    def tgt_lang(self) -> str: ...


def split_code(code: str) -> tuple[str, str]:
    """(ISO 639-3 language, ISO 15924 script) of a BOUQuET code; the glottocode is dropped."""
    parsed = LanguageCode.parse(code)
    return parsed.language, parsed.script


def nllb_code(code: str) -> str:
    """The NLLB-200 language token for a BOUQuET code."""
    language, script = split_code(code)
    return NLLB_CODE_DIFFERENCES.get(f"{language}_{script}", f"{language}_{script}")


def nllb_prompt(src_lang: str, tgt_lang: str, src_text: str) -> str:
    """The prompt `NLLBTranslator` reads: both NLLB codes, then the text, tab-separated.

    Codes hold no tab, so the first two tabs end them whatever the text holds.
    """
    return f"{nllb_code(src_lang)}\t{nllb_code(tgt_lang)}\t{src_text}"


def madlad_code(code: str) -> str:
    """The code in MADLAD-400's `<2xx>` token for a BOUQuET code.

    ISO 639-1 where the language (or its macrolanguage: cmn -> zh, ekk -> et, pes -> fa) has
    one, else ISO 639-3; the script is appended when it is not the language's usual one
    (cmn_Hant -> zh_Hant, srp_Latn -> sr_Latn), as far as langcodes knows the usual one.
    """
    import langcodes

    language, script = split_code(code)
    tag = langcodes.standardize_tag(_MACROLANGUAGES.get(language, language), macro=True)
    if "-" in tag:
        # A region means a variety of another language (prs -> fa-AF): keep the variety's code.
        tag = language
    tag = MADLAD_CODE_DIFFERENCES.get(tag, tag)
    # Only languages in CLDR's likely-subtags data have a known usual script; langcodes would
    # give the others Latin, which would put a suffix on every Arabic-script variety it lacks.
    likely = langcodes.LIKELY_SUBTAGS.get(tag)
    usual_script = langcodes.Language.get(likely).script if likely else None
    return tag if usual_script in (None, script) else f"{tag}_{script}"


def madlad_prompt(src_lang: str, tgt_lang: str, src_text: str) -> str:
    """MADLAD-400's input: the target language token, then the text."""
    return f"<2{madlad_code(tgt_lang)}> {src_text}"


def aya_supports(code: str) -> bool:
    """Whether Aya-101 was trained on the language of a BOUQuET code (any script)."""
    import langcodes

    language, _ = split_code(code)
    language = _MACROLANGUAGES.get(language, language)
    return any(
        langcodes.tag_distance(language, trained) <= AYA_MAX_DISTANCE for trained in AYA_LANGUAGES
    )


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices into `lengths` in batches of similar length, so that little goes to padding.

    Longest first, so that a batch too large for memory fails at once, not at the end.
    """
    order = sorted(range(len(lengths)), key=lambda index: lengths[index], reverse=True)
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


Key = TypeVar("Key", bound=Hashable)


@dataclass
class Seq2SeqStats:
    """Totals of one translator. A direction's prompts and tokens are counted when it is done,
    so that the counts between two finished directions are exactly the later one's; batches
    are counted as they are generated."""

    prompts: int = 0
    generated_tokens: int = 0
    batches: int = 0

    def add(self, generated: Sequence[Sequence[int]]) -> None:
        self.prompts += len(generated)
        # The decoder's start token was given, not generated.
        self.generated_tokens += sum(len(row) - 1 for row in generated)


class Seq2SeqTranslator(Generic[Key]):
    """What the three families share: loading, batching, generation and decoding.

    A family says how a prompt splits into a group key and the text to encode (prompts of one
    group are encoded and generated alike), how a group is encoded, and what extra arguments
    its generation takes.
    """

    family: ClassVar[str]

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        num_beams: int = 1,
        max_new_tokens: int = 256,
    ) -> None:
        if dtype not in ("auto", *DTYPES):
            raise ValueError(
                f"{self.family} dtype must be 'auto' or one of {DTYPES}, not '{dtype}'"
            )
        for name, value in (
            ("batch_size", batch_size),
            ("num_beams", num_beams),
            ("max_new_tokens", max_new_tokens),
        ):
            if value < 1:
                raise ValueError(f"{self.family} {name} must be positive, not {value}")
        self.model_name = str(model)
        self.revision = revision
        self.device = device
        self.dtype = dtype
        self.batch_size = batch_size
        self.num_beams = num_beams
        self.max_new_tokens = max_new_tokens
        self.model: Any = None
        """The loaded model; None until `load` or the first `translate` call."""
        self._tokenizer: Any = None
        self.stats = Seq2SeqStats()
        # Decoding steps of the batch being generated, for the stall watchdog: a batch of long
        # outputs on a CPU is minutes of generation, each step a fraction of a second.
        self.decoding_steps = 0

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer, loaded on first use; the language checks need only this."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model_name, revision=self.revision)
        return self._tokenizer

    def resolved_device(self) -> str:
        return resolve_device(self.device)

    def resolved_dtype(self) -> str:
        return resolve_dtype(self.dtype, self.device)

    def check_directions(self, directions: Iterable[LanguagePair]) -> None:
        """Raise `UnsupportedLanguageError` naming every language of `directions` the model
        cannot handle. Loads at most the tokenizer, never the model."""
        codes = {code for pair in directions for code in (pair.src_lang, pair.tgt_lang)}
        unsupported = self.unsupported_languages(sorted(codes))
        if unsupported:
            raise UnsupportedLanguageError(self.model_name, unsupported)

    def unsupported_languages(self, codes: Sequence[str]) -> dict[str, str]:
        """BOUQuET code -> the model's code for it, of the codes the model does not support."""
        raise NotImplementedError

    def translate(self, prompts: list[str]) -> list[str]:
        for _, translations in self.translate_batches([prompts]):
            return translations
        return []

    def translate_batches(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        """See `bouquet_eval.translators.BatchTranslator`: a window of directions at a time."""
        source = enumerate(batches)
        window_size = WINDOW_BATCHES * self.batch_size
        while window := _take_prompts(source, window_size):
            prompts = [prompt for _, batch in window for prompt in batch]
            owner = [slot for slot, (_, batch) in enumerate(window) for _ in batch]
            left = [len(batch) for _, batch in window]
            generated: list[list[int]] = [[] for _ in prompts]
            starts = [sum(left[:slot]) for slot in range(len(window))]
            for index, batch in window:
                if not batch:
                    yield index, []
            for indices, rows in self.generated_batches(prompts):
                for prompt, row in zip(indices, rows, strict=True):
                    generated[prompt] = row
                    left[owner[prompt]] -= 1
                for slot in sorted({owner[prompt] for prompt in indices}):
                    if left[slot] == 0:
                        done = generated[starts[slot] : starts[slot] + len(window[slot][1])]
                        self.stats.add(done)
                        yield window[slot][0], self.decode(done)

    def decode(self, generated: list[list[int]]) -> list[str]:
        return self.tokenizer.batch_decode(generated, skip_special_tokens=True) if generated else []

    def load(self) -> None:
        """Load the model now, so that its load is timed apart from the first direction."""
        self.load_model()

    def generate_ids(self, prompts: list[str]) -> list[list[int]]:
        """The generated token ids of each prompt, in the prompts' order, without trailing
        padding; the decoder's start token comes first."""
        generated: list[list[int]] = [[] for _ in prompts]
        for indices, rows in self.generated_batches(prompts):
            for index, row in zip(indices, rows, strict=True):
                generated[index] = row
        return generated

    def generated_batches(self, prompts: list[str]) -> Iterator[tuple[list[int], list[list[int]]]]:
        """(indices into `prompts`, their generated ids) for each batch, as it is generated.

        Prompts are encoded by group key and batched by generation group, longest first.
        """
        if not prompts:
            return
        keys: dict[Key, list[int]] = {}
        texts = []
        for index, prompt in enumerate(prompts):
            key, text = self.split_prompt(prompt)
            keys.setdefault(key, []).append(index)
            texts.append(text)
        # Before the model loads: a wrong language costs seconds, not a model load.
        self.check_groups(list(keys))
        model = self.load_model()
        encoded: list[list[int]] = [[] for _ in prompts]
        groups: dict[Hashable, list[int]] = {}
        for key, indices in keys.items():
            for index, ids in zip(
                indices, self.encode(key, [texts[i] for i in indices]), strict=True
            ):
                encoded[index] = ids
            groups.setdefault(self.generation_group(key), []).extend(indices)
        batches = 0
        started = time.monotonic()
        for group, indices in groups.items():
            for batch in length_sorted_batches([len(encoded[i]) for i in indices], self.batch_size):
                chosen = [indices[j] for j in batch]
                rows = self.generate_batch(model, [encoded[i] for i in chosen], group)
                batches += 1
                self.stats.batches += 1
                yield chosen, rows
        log.info(
            "%s: %d prompts in %d batches in %.1f s",
            self.family,
            len(prompts),
            batches,
            time.monotonic() - started,
        )

    def split_prompt(self, prompt: str) -> tuple[Key, str]:
        """(group key, text to encode) of a prompt."""
        raise NotImplementedError

    def check_groups(self, keys: list[Key]) -> None:
        """Raise before any work if a group cannot be translated."""

    def encode(self, key: Key, texts: list[str]) -> list[list[int]]:
        return self.tokenizer(texts)["input_ids"]

    def generation_group(self, key: Key) -> Hashable:
        """Prompts of keys with the same generation group can share a batch."""
        return None

    def generation_kwargs(self, group: Hashable) -> dict[str, Any]:
        return {}

    def load_model(self) -> Any:
        if self.model is None:
            import torch
            from transformers import AutoModelForSeq2SeqLM

            started = time.monotonic()
            device, dtype = self.resolved_device(), self.resolved_dtype()
            model = AutoModelForSeq2SeqLM.from_pretrained(
                self.model_name, revision=self.revision, dtype=getattr(torch, dtype)
            )
            self.model = model.to(device).eval()
            log.info(
                "%s: loaded %s (%s, %s) in %.1f s",
                self.family,
                self.model_name,
                device,
                dtype,
                time.monotonic() - started,
            )
        return self.model

    def generate_batch(self, model: Any, rows: list[list[int]], group: Hashable) -> list[list[int]]:
        import torch

        inputs = self.tokenizer.pad({"input_ids": rows}, return_tensors="pt").to(model.device)
        with torch.inference_mode():
            output: torch.Tensor = model.generate(
                **inputs,
                do_sample=False,
                num_beams=self.num_beams,
                max_new_tokens=self.max_new_tokens,
                stopping_criteria=[_StepCounter(self)],
                **self.generation_kwargs(group),
            )
        return [self.without_padding(row) for row in output.tolist()]

    def without_padding(self, row: list[int]) -> list[int]:
        pad = self.tokenizer.pad_token_id
        end = len(row)
        # Some decoders start with the padding token (T5): keep at least that one.
        while end > 1 and row[end - 1] == pad:
            end -= 1
        return row[:end]


class _StepCounter:
    """A stopping criterion that stops nothing: it counts the decoding steps of a translator
    (`Seq2SeqTranslator.decoding_steps`), which the stall watchdog reads as progress."""

    def __init__(self, translator: Seq2SeqTranslator[Any]) -> None:
        self.translator = translator

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.translator.decoding_steps += 1
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class NLLBTranslator(Seq2SeqTranslator[tuple[str, str]]):
    """NLLB-200 (`facebook/nllb-200-*`), with prompts from `nllb_prompt`."""

    family = "nllb"

    def language_tokens(self) -> set[str]:
        """The language codes the tokenizer has tokens for: its added tokens shaped like one."""
        return {token for token in self.tokenizer.get_added_vocab() if _NLLB_CODE.fullmatch(token)}

    def unsupported_languages(self, codes: Sequence[str]) -> dict[str, str]:
        known = self.language_tokens()
        wanted = {code: nllb_code(code) for code in codes}
        return {code: token for code, token in wanted.items() if token not in known}

    def split_prompt(self, prompt: str) -> tuple[tuple[str, str], str]:
        match = _NLLB_PROMPT.match(prompt)
        if match is None:
            raise ValueError(
                "NLLBTranslator reads prompts '<src code>\\t<tgt code>\\t<text>': set the model's "
                "prompt_fn to 'bouquet_eval.translators.hf_seq2seq:nllb_prompt', not "
                f"{prompt[:60]!r}"
            )
        return (match.group(1), match.group(2)), match.group(3)

    def check_groups(self, keys: list[tuple[str, str]]) -> None:
        known = self.language_tokens()
        missing = {code for key in keys for code in key if code not in known}
        if missing:
            raise UnsupportedLanguageError(self.model_name, {code: code for code in missing})

    def encode(self, key: tuple[str, str], texts: list[str]) -> list[list[int]]:
        src_code, _ = key
        # The tokenizer puts the source code token around the text (its position depends on
        # the tokenizer's legacy_behaviour), so the source is set on the tokenizer.
        self.tokenizer.src_lang = src_code
        return self.tokenizer(texts)["input_ids"]

    def generation_group(self, key: tuple[str, str]) -> str:
        _, tgt_code = key
        return tgt_code

    def generation_kwargs(self, group: Hashable) -> dict[str, Any]:
        return {"forced_bos_token_id": self.tokenizer.convert_tokens_to_ids(group)}


class MadladTranslator(Seq2SeqTranslator[str]):
    """MADLAD-400 MT (`google/madlad400-*-mt`), with prompts from `madlad_prompt`."""

    family = "madlad"

    def language_tokens(self) -> set[str]:
        """The `<2xx>` tokens of the vocabulary, pieces or added tokens alike."""
        return {token for token in self.tokenizer.get_vocab() if _MADLAD_TOKEN.fullmatch(token)}

    def unsupported_languages(self, codes: Sequence[str]) -> dict[str, str]:
        # The target needs its token; a source without one is most likely not among the
        # languages MADLAD was trained on, so both sides are held to it.
        known = self.language_tokens()
        wanted = {code: madlad_code(code) for code in codes}
        return {code: tag for code, tag in wanted.items() if f"<2{tag}>" not in known}

    def split_prompt(self, prompt: str) -> tuple[str, str]:
        match = _MADLAD_TOKEN.match(prompt)
        if match is None:
            raise ValueError(
                "MadladTranslator reads prompts '<2xx> <text>': set the model's prompt_fn to "
                f"'bouquet_eval.translators.hf_seq2seq:madlad_prompt', not {prompt[:60]!r}"
            )
        # The token stays in the text: it is the model's input.
        return match.group(1), prompt

    def check_groups(self, keys: list[str]) -> None:
        known = self.language_tokens()
        missing = {tag for tag in keys if f"<2{tag}>" not in known}
        if missing:
            # Without its token the prefix would be split into pieces and ignored silently.
            raise UnsupportedLanguageError(self.model_name, {tag: tag for tag in missing})


class AyaTranslator(Seq2SeqTranslator[None]):
    """Aya-101 (`CohereForAI/aya-101`), an instruction-tuned mT5, with the default prompt.

    `allow_untrained_languages=True` lets through languages outside its 101 training languages:
    the prompt names languages in English, so the model can be asked for any.
    """

    family = "aya"

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        num_beams: int = 1,
        max_new_tokens: int = 256,
        allow_untrained_languages: bool = False,
    ) -> None:
        super().__init__(model, revision, device, dtype, batch_size, num_beams, max_new_tokens)
        self.allow_untrained_languages = allow_untrained_languages

    def unsupported_languages(self, codes: Sequence[str]) -> dict[str, str]:
        if self.allow_untrained_languages:
            return {}
        return {code: code for code in codes if not aya_supports(code)}

    def split_prompt(self, prompt: str) -> tuple[None, str]:
        return None, prompt


def _take_prompts(
    source: Iterator[tuple[int, list[str]]], size: int
) -> list[tuple[int, list[str]]]:
    """Whole batches from `source` until they hold at least `size` prompts, or it ends."""
    taken: list[tuple[int, list[str]]] = []
    count = 0
    for index, batch in source:
        taken.append((index, batch))
        count += len(batch)
        if count >= size:
            break
    return taken
