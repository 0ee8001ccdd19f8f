"""NLLB, MADLAD and Aya translators on tiny random checkpoints, checked against plain
one-sentence-at-a-time generation with inputs built by hand."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from bouquet_eval import run_translation
from bouquet_eval.data.dataset import Direction
from bouquet_eval.translators import BatchTranslator, load_prompt_fn, load_translator
from bouquet_eval.translators import hf_seq2seq as module
from bouquet_eval.translators.hf_seq2seq import (
    AyaTranslator,
    MadladTranslator,
    NLLBTranslator,
    UnsupportedLanguageError,
    aya_supports,
    length_sorted_batches,
    madlad_code,
    madlad_prompt,
    nllb_code,
    nllb_prompt,
)
from bouquet_eval.translators.prompt import build_prompt

from .seq2seq_inputs import MAX_NEW_TOKENS, four_directions, make, texts
from .tiny_seq2seq import build_aya, build_madlad, build_nllb

MODULE = "bouquet_eval.translators.hf_seq2seq"


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Models this small gain nothing from more threads, and lose much when cores are busy."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-seq2seq")
    return {
        "nllb": build_nllb(root / "nllb"),
        "madlad": build_madlad(root / "madlad"),
        "aya": build_aya(root / "aya"),
    }


@pytest.fixture
def tokenizer_only(checkpoints: dict[str, Path], tmp_path: Path):
    """A copy of a checkpoint without its model: loading the model from it fails."""

    def copy(family: str) -> Path:
        AutoTokenizer.from_pretrained(checkpoints[family]).save_pretrained(tmp_path / family)
        return tmp_path / family

    return copy


@cache
def reference_model(checkpoint: Path):
    return AutoModelForSeq2SeqLM.from_pretrained(checkpoint).eval()


@cache
def reference_tokenizer(checkpoint: Path):
    return AutoTokenizer.from_pretrained(checkpoint)


def reference_ids(
    checkpoint: Path, input_ids: list[int], num_beams: int = 1, **generation: int
) -> list[int]:
    """What the model generates for one input on its own, no padding anywhere."""
    with torch.inference_mode():
        output = reference_model(checkpoint).generate(
            input_ids=torch.tensor([input_ids]),
            do_sample=False,
            num_beams=num_beams,
            max_new_tokens=MAX_NEW_TOKENS,
            **generation,
        )
    return output[0].tolist()


def nllb_reference(checkpoint: Path, src: str, tgt: str, text: str, num_beams: int = 1):
    """NLLB's input by hand: source code, text, </s>; the target code forced first."""
    tokenizer = reference_tokenizer(checkpoint)
    code = tokenizer.convert_tokens_to_ids
    input_ids = [code(src), *tokenizer(text, add_special_tokens=False)["input_ids"], 2]
    return reference_ids(checkpoint, input_ids, num_beams, forced_bos_token_id=code(tgt))


def madlad_reference(checkpoint: Path, tag: str, text: str, num_beams: int = 1) -> list[int]:
    """MADLAD's input by hand: the <2xx> token, the text, </s>."""
    tokenizer = reference_tokenizer(checkpoint)
    words = tokenizer(text, add_special_tokens=False)["input_ids"]
    input_ids = [tokenizer.convert_tokens_to_ids(f"<2{tag}>"), *words, tokenizer.eos_token_id]
    return reference_ids(checkpoint, input_ids, num_beams)


def aya_reference(checkpoint: Path, prompt: str, num_beams: int = 1) -> list[int]:
    tokenizer = reference_tokenizer(checkpoint)
    return reference_ids(checkpoint, tokenizer(prompt)["input_ids"], num_beams)


def trimmed(row: list[int], pad: int) -> list[int]:
    while len(row) > 1 and row[-1] == pad:
        row = row[:-1]
    return row


def cases(family: str, checkpoint: Path, num_beams: int = 1) -> tuple[list[str], list[list[int]]]:
    """Prompts and, for each, the ids of generating it alone."""
    sentences = texts(7)
    if family == "nllb":
        # Two directions interleaved: each needs its own source and target codes.
        pairs = [("eng_Latn", "cmn_Hant"), ("fra_Latn", "por_Latn_braz1246")]
        directions = [pairs[i % 2] for i in range(len(sentences))]
        prompts = [nllb_prompt(s, t, x) for (s, t), x in zip(directions, sentences, strict=True)]
        expected = [
            nllb_reference(checkpoint, nllb_code(s), nllb_code(t), x, num_beams)
            for (s, t), x in zip(directions, sentences, strict=True)
        ]
        return prompts, [trimmed(row, 1) for row in expected]
    if family == "madlad":
        targets = ["cmn_Hant", "ekk_Latn", "fra_Latn"]
        languages = [targets[i % 3] for i in range(len(sentences))]
        prompts = [
            madlad_prompt("eng_Latn", t, x) for t, x in zip(languages, sentences, strict=True)
        ]
        expected = [
            madlad_reference(checkpoint, madlad_code(t), x, num_beams)
            for t, x in zip(languages, sentences, strict=True)
        ]
        return prompts, [trimmed(row, 0) for row in expected]
    prompts = [build_prompt("eng_Latn", "fra_Latn", x) for x in sentences]
    return prompts, [trimmed(aya_reference(checkpoint, p, num_beams), 0) for p in prompts]


# --- language codes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "nllb", "madlad"),
    [
        ("cmn_Hans", "zho_Hans", "zh"),
        ("cmn_Hant", "zho_Hant", "zh_Hant"),
        ("kor_Kore", "kor_Hang", "ko"),
        ("ekk_Latn", "est_Latn", "et"),
        ("por_Latn_braz1246", "por_Latn", "pt"),
        ("twi_Latn_akua1239", "twi_Latn", "ak"),
        ("arz_Arab", "arz_Arab", "arz"),
        ("arb_Arab", "arb_Arab", "ar"),
        ("pes_Arab", "pes_Arab", "fa"),
        ("prs_Arab", "prs_Arab", "prs"),
        ("nob_Latn", "nob_Latn", "no"),
        ("tgl_Latn", "tgl_Latn", "fil"),
        ("pbt_Arab", "pbt_Arab", "ps"),
        ("srp_Cyrl", "srp_Cyrl", "sr"),
        ("srp_Latn", "srp_Latn", "sr_Latn"),
        ("acm_Arab", "acm_Arab", "acm"),
    ],
)
def test_language_codes(code: str, nllb: str, madlad: str) -> None:
    assert nllb_code(code) == nllb
    assert madlad_code(code) == madlad


def test_malformed_codes_are_refused() -> None:
    for code in ("en", "eng-Latn", "eng_latn", "por_Latn_brazil"):
        with pytest.raises(ValueError, match="not a BOUQuET language code"):
            nllb_code(code)
        with pytest.raises(ValueError, match="not a BOUQuET language code"):
            madlad_prompt("eng_Latn", code, "text")


def test_aya_languages() -> None:
    trained = ["eng_Latn", "cmn_Hant", "arz_Arab", "pes_Arab", "swh_Latn", "pbt_Arab", "hin_Latn"]
    untrained = ["lij_Latn", "zlm_Latn", "hrv_Latn", "ary_Arab", "yue_Hant"]
    assert [code for code in trained + untrained if aya_supports(code)] == trained


def test_nllb_prompt_keeps_the_text_exactly() -> None:
    text = "\tcol 1\tcol 2\n  second line eng_Latn\t"
    key, parsed = NLLBTranslator(model="unused").split_prompt(
        nllb_prompt("cmn_Hans", "kor_Kore", text)
    )
    assert key == ("zho_Hans", "kor_Hang")
    assert parsed == text


def test_prompts_of_another_family_are_refused() -> None:
    prompt = build_prompt("eng_Latn", "fra_Latn", "text")
    with pytest.raises(ValueError, match="hf_seq2seq:nllb_prompt"):
        NLLBTranslator(model="does-not-exist").translate([prompt])
    with pytest.raises(ValueError, match="hf_seq2seq:madlad_prompt"):
        MadladTranslator(model="does-not-exist").translate([prompt])


def test_length_sorted_batches() -> None:
    batches = length_sorted_batches([3, 9, 1, 7, 5], 2)
    assert batches == [[1, 3], [4, 0], [2]]


# --- what the models receive and generate -----------------------------------------------


def test_nllb_sets_the_source_code_and_forces_the_target_code(
    checkpoints: dict[str, Path],
) -> None:
    translator = make("nllb", checkpoints["nllb"])
    tokenizer = translator.tokenizer
    encoded = translator.encode(("fra_Latn", "zho_Hant"), ["abc def", "gh"])
    assert [row[0] for row in encoded] == [tokenizer.convert_tokens_to_ids("fra_Latn")] * 2
    assert [row[-1] for row in encoded] == [tokenizer.eos_token_id] * 2

    prompts = [
        nllb_prompt("eng_Latn", "cmn_Hant", "abc"),
        nllb_prompt("deu_Latn", "ekk_Latn", "ab"),
    ]
    generated = translator.generate_ids(prompts)
    # The decoder starts with </s>, then the forced target code.
    assert [row[:2] for row in generated] == [
        [2, tokenizer.convert_tokens_to_ids("zho_Hant")],
        [2, tokenizer.convert_tokens_to_ids("est_Latn")],
    ]
    outputs = translator.translate(prompts)
    assert not any(token in output for output in outputs for token in ("zho_Hant", "</s>"))


def test_madlad_input_starts_with_the_target_token(checkpoints: dict[str, Path]) -> None:
    translator = make("madlad", checkpoints["madlad"])
    prompt = madlad_prompt("eng_Latn", "cmn_Hant", "abc def")
    key, text = translator.split_prompt(prompt)
    [encoded] = translator.encode(key, [text])
    tokenizer = translator.tokenizer
    assert encoded[0] == tokenizer.convert_tokens_to_ids("<2zh_Hant>")
    assert tokenizer.convert_ids_to_tokens(encoded[1:-1]) == tokenizer.tokenize("abc def")


@pytest.mark.parametrize("family", ["nllb", "madlad", "aya"])
def test_batches_give_what_one_at_a_time_gives(family: str, checkpoints: dict[str, Path]) -> None:
    prompts, expected = cases(family, checkpoints[family])
    # Otherwise a mix-up of the order could go unnoticed.
    assert len({tuple(row) for row in expected}) > 2
    translator = make(family, checkpoints[family], batch_size=3)
    assert translator.generate_ids(prompts) == expected
    tokenizer = translator.tokenizer
    assert translator.translate(prompts) == tokenizer.batch_decode(
        expected, skip_special_tokens=True
    )


@pytest.mark.parametrize("family", ["nllb", "madlad"])
def test_beams_are_used(family: str, checkpoints: dict[str, Path]) -> None:
    prompts, greedy = cases(family, checkpoints[family])
    _, beam = cases(family, checkpoints[family], num_beams=3)
    assert beam != greedy
    translator = make(family, checkpoints[family], num_beams=3, batch_size=2)
    assert translator.generate_ids(prompts) == beam


def test_model_loads_once(checkpoints: dict[str, Path]) -> None:
    translator = make("aya", checkpoints["aya"])
    assert translator.model is None
    first = translator.translate([build_prompt("eng_Latn", "fra_Latn", "abc")])
    model = translator.model
    second = translator.translate([build_prompt("eng_Latn", "fra_Latn", "abc")])
    assert translator.model is model
    assert first == second
    assert translator.translate([]) == []


def test_dtype_and_device(checkpoints: dict[str, Path]) -> None:
    translator = make("aya", checkpoints["aya"], dtype="bfloat16")
    [output] = translator.translate([build_prompt("eng_Latn", "fra_Latn", "abc")])
    assert isinstance(output, str)
    assert {parameter.dtype for parameter in translator.model.parameters()} == {torch.bfloat16}
    assert translator.model.device.type == "cpu"
    assert make("aya", checkpoints["aya"]).resolved_dtype() == "float32"
    with pytest.raises(ValueError, match="dtype must be"):
        AyaTranslator(model="unused", dtype="float8")
    with pytest.raises(ValueError, match="num_beams must be positive"):
        NLLBTranslator(model="unused", num_beams=0)


# --- unsupported languages fail before any loading --------------------------------------


def test_nllb_unsupported_languages(tokenizer_only) -> None:
    translator = NLLBTranslator(model=str(tokenizer_only("nllb")), device="cpu")
    translator.check_directions([Direction("cmn_Hant", "por_Latn_braz1246")])
    with pytest.raises(UnsupportedLanguageError) as error:
        translator.check_directions(
            [
                Direction("cmn_Hans", "ekk_Latn"),
                Direction("kor_Kore", "eng_Latn"),
                Direction("eng_Latn", "lij_Latn"),
            ]
        )
    assert error.value.unsupported == {"kor_Kore": "kor_Hang", "lij_Latn": "lij_Latn"}
    assert "2 language(s): kor_Kore (as kor_Hang), lij_Latn." in str(error.value)
    # The folder has no model: had it been loaded first, this would be an OSError.
    with pytest.raises(UnsupportedLanguageError, match="kor_Hang"):
        translator.translate([nllb_prompt("eng_Latn", "kor_Kore", "abc")])
    assert translator.model is None


def test_madlad_unsupported_languages(tokenizer_only) -> None:
    translator = MadladTranslator(model=str(tokenizer_only("madlad")), device="cpu")
    translator.check_directions([Direction("cmn_Hant", "ekk_Latn")])
    with pytest.raises(UnsupportedLanguageError) as error:
        translator.check_directions(
            [Direction("eng_Latn", "nob_Latn"), Direction("arz_Arab", "por_Latn_braz1246")]
        )
    assert error.value.unsupported == {"nob_Latn": "no", "arz_Arab": "arz"}
    with pytest.raises(UnsupportedLanguageError, match=r"1 language\(s\): no\."):
        translator.translate([madlad_prompt("eng_Latn", "nob_Latn", "abc")])
    assert translator.model is None


def test_aya_unsupported_languages_need_no_files() -> None:
    translator = AyaTranslator(model="does-not-exist")
    directions = [Direction("arz_Arab", "eng_Latn"), Direction("eng_Latn", "lij_Latn")]
    with pytest.raises(UnsupportedLanguageError) as error:
        translator.check_directions(directions)
    assert error.value.unsupported == {"lij_Latn": "lij_Latn"}
    AyaTranslator(model="does-not-exist", allow_untrained_languages=True).check_directions(
        directions
    )


def test_building_translators_imports_neither_torch_nor_transformers() -> None:
    code = f"""
import sys
from {MODULE} import AyaTranslator, MadladTranslator, NLLBTranslator, madlad_prompt, nllb_prompt
from bouquet_eval.data.dataset import Direction
for factory in (AyaTranslator, MadladTranslator, NLLBTranslator):
    factory(model="facebook/nllb-200-distilled-600M", num_beams=4, dtype="bfloat16")
nllb_prompt("cmn_Hans", "eng_Latn", "text")
madlad_prompt("eng_Latn", "cmn_Hant", "text")
AyaTranslator(model="CohereForAI/aya-101").check_directions([Direction("eng_Latn", "fra_Latn")])
print(sorted(name for name in ("torch", "transformers") if name in sys.modules))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# --- through the runner -------------------------------------------------------------------


def test_runner_loads_and_calls_the_translator(
    checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    settings = {
        "model": str(checkpoints["nllb"]),
        "device": "cpu",
        "max_new_tokens": MAX_NEW_TOKENS,
    }
    translator = load_translator(f"{MODULE}:NLLBTranslator", settings)
    assert isinstance(translator, BatchTranslator)
    prompt_fn = load_prompt_fn(f"{MODULE}:nllb_prompt", None)
    sources = texts(3)
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    pd.DataFrame(
        {
            "src_lang": "cmn_Hans",
            "tgt_lang": "ekk_Latn",
            "src_text": sources,
            "tgt_text": "",
            "uniq_id": ["a", "b", "c"],
        }
    ).to_parquet(dataset / "cmn_Hans-ekk_Latn.parquet")
    run_translation(translator, ["cmn_Hans-ekk_Latn"], tmp_path / "out", prompt_fn, dataset)
    written = pd.read_json(tmp_path / "out" / "cmn_Hans-ekk_Latn.jsonl", lines=True)
    expected = [nllb_reference(checkpoints["nllb"], "zho_Hans", "est_Latn", x) for x in sources]
    tokenizer = reference_tokenizer(checkpoints["nllb"])
    assert written["mt_text"].tolist() == tokenizer.batch_decode(expected, skip_special_tokens=True)
    assert isinstance(translator, NLLBTranslator) and translator.stats.prompts == 3


# --- many directions at once --------------------------------------------------------------


@pytest.mark.parametrize("window_batches", [64, 1])
@pytest.mark.parametrize("family", ["nllb", "madlad", "aya"])
def test_directions_sorted_together_give_what_each_alone_gives(
    family: str, window_batches: int, checkpoints: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    directions = four_directions(family)
    alone = make(family, checkpoints[family], batch_size=3)
    expected = [alone.translate(prompts) for prompts in directions]
    # Each alone: two batches of 3 + 1.
    assert alone.stats.batches == 8
    monkeypatch.setattr(module, "WINDOW_BATCHES", window_batches)
    translator = make(family, checkpoints[family], batch_size=3)
    streamed = list(translator.translate_batches([*directions[:2], [], *directions[2:]]))
    assert sorted(index for index, _ in streamed) == [0, 1, 2, 3, 4]
    assert dict(streamed) == dict(enumerate([*expected[:2], [], *expected[2:]]))
    # A window of 3 prompts holds one direction; one of 192 holds them all, and batches of
    # 3 then span directions (NLLB's two languages: 8 prompts, 3 batches each).
    assert translator.stats.batches == (8 if window_batches == 1 else 6)
    assert (translator.stats.prompts, translator.stats.generated_tokens) == (
        alone.stats.prompts,
        alone.stats.generated_tokens,
    )
