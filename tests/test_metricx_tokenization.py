"""MetricX's token ids equal the official pipeline's, checked against the official versions.

google-research/metricx's `predict.py` tokenizes with transformers 4.30.2 (its
requirements.txt), whose tokenizer the project does not load. Here those versions are installed
into a throwaway folder under pytest's cache (tokenizing needs no torch), and `predict.py`'s
steps (its input text, `tokenizer(text, max_length=1536, truncation=True, padding=False)`, the
last token dropped) run in a subprocess on inputs where transformers 5 gives other ids:
whitespace of every kind at either end, empty fields, literal special tokens, normalisation-
sensitive characters, scripts the vocabulary lacks, and inputs cut at 1536 tokens.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.metrics.metricx import MetricX
from bouquet_eval.metrics.metricx_tokenizer import (
    build_tokenizer,
    score_token_id,
    tokenizer_files,
)

from .hf_cache import cache_entry
from .pip_site import installed_site
from .tiny_mt5 import (
    pseudo_sentence,
    train_tokenizer,
    training_lines,
    write_t5_sentencepiece,
)

OFFICIAL_VERSIONS = (
    "transformers==4.30.2",
    "tokenizers==0.13.3",
    "sentencepiece==0.1.99",
    "huggingface_hub==0.16.4",
    # transformers 4.30.2 predates numpy 2, which the project's environment has.
    "numpy==1.26.4",
)

OFFICIAL_SCRIPT = """
import json, sys
import tokenizers, transformers

request = json.load(sys.stdin)
tokenizer = transformers.AutoTokenizer.from_pretrained(request["tokenizer"])
ids = {}
for mode in ("reference", "qe"):
    ids[mode] = []
    for source, hypothesis, reference in request["rows"]:
        # metricx24/predict.py: _make_input, _tokenize, _remove_eos.
        text = "source: " + source + " candidate: " + hypothesis
        if mode == "reference":
            text += " reference: " + reference
        encoded = tokenizer(text, max_length=1536, truncation=True, padding=False)
        ids[mode].append(encoded["input_ids"][:-1])
json.dump({
    "versions": [transformers.__version__, tokenizers.__version__],
    "class": type(tokenizer).__name__,
    "score_ids": [tokenizer.convert_tokens_to_ids(p) for p in ("▁<extra_id_10>", "<extra_id_10>")],
    "unk_id": tokenizer.unk_token_id,
    "ids": ids,
}, sys.stdout)
"""

WHITESPACE = (
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x85",
    "\u00a0",  # no-break space
    "\u1680",
    "\u180e",
    "\u2002",
    "\u2003",
    "\u2009",
    "\u200a",
    "\u200b",  # zero-width space
    "\u200c",
    "\u200d",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",  # ideographic space
    "\ufeff",
    " \n \t ",
)
SPECIAL_STRINGS = (
    "</s>",
    "<pad>",
    "<unk>",
    "<s>",
    "<extra_id_0>",
    "<extra_id_10>",
    "<extra_id_99>",
    "<extra_id_100>",
    "▁<extra_id_10>",
    "</s></s>",
    "<extra_id_1><extra_id_2>",
    "< /s>",
    "</S>",
)
SCRIPTS = (
    "你好，世界。第二句话！",  # noqa: RUF001
    "こんにちは、世界",
    "안녕하세요 세계",
    "🙂🚀 party 🎉 👩‍👩‍👧 👍🏽 🇫🇷",
    "नमस्ते दुनिया",
    "مرحبا بالعالم",
    "สวัสดีชาวโลก",
    # A script the tiny vocabulary has not seen: unknown pieces.
    "Γειά σου Κόσμε",  # noqa: RUF001
    "שלום עולם",
    "Привет, мир!",
)
NORMALISATION = (
    "ﬁnal ﬂow",
    "Ａｂｃ１２３！",  # noqa: RUF001
    "e\u0301te\u0301",
    "été",
    "\u212b \u00c5 A\u030a",
    "\u2126 \u03a9",
    "½ x² ①②",
    "ｶﾞｷﾞ ㈱ ㍿",
    "\u1100\u1161 가",
    "… ‘quoted’ “double” — –",  # noqa: RUF001
    "soft\u00adhyphen",
    "rtl\u200fmark\u200e",
    "nul\x00bell\x07",
    "Ⅻ ℃ ㎏",
)


def tricky_rows() -> list[tuple[str, str, str]]:
    """(source, candidate, reference) triples covering what the two tokenizers treat unlike."""
    rows: list[tuple[str, str, str]] = []
    base = "Hello world"
    for space in WHITESPACE:
        rows += [
            ("Bonjour le monde", base + space, "Hello, world."),
            ("Bonjour le monde", space + base, "Hello, world." + space),
            ("Bonjour" + space, base.replace(" ", space), space),
            (space, space, space),
            ("你好" + space, "世界" + space + space, space + "世界"),
        ]
    rows += [("Bonjour", "", "Hello"), ("Bonjour", "Hello", ""), ("", "Hello", "Hi"), ("", "", "")]
    for special in SPECIAL_STRINGS:
        rows += [
            ("source", special, "reference"),
            ("source " + special, "a" + special + "b", special + " reference"),
            ("source", "candidate " + special + " ", special + "\n"),
        ]
    for text in SCRIPTS + NORMALISATION:
        rows += [(text, text + " ", text), (text + "\n", text, " " + text)]
    rows += long_rows(random.Random(1))
    rows += fuzz_rows(random.Random(2), 150)
    return rows


def long_rows(rng: random.Random) -> list[tuple[str, str, str]]:
    """Inputs over 1536 tokens, cut in the source, in the candidate or in the reference."""

    def long_text(words: int) -> str:
        return pseudo_sentence(rng, words, ("latin", "cyrillic", "han", "emoji"))

    return [
        (long_text(700), "short candidate\n", "short reference "),
        ("short source", long_text(700) + " </s> ", "reference"),
        ("short source", "candidate", long_text(900) + "\u3000"),
        (long_text(330), long_text(40) + "\n", long_text(330) + " "),
        (" ".join(["</s>"] * 2000), "x", "y"),
        ("\n".join(["word"] * 2000), "x ", "y\t"),
    ]


def fuzz_rows(rng: random.Random, count: int) -> list[tuple[str, str, str]]:
    """Random strings over an alphabet that mixes all of the above, ends included."""
    pieces = [
        *WHITESPACE,
        *SPECIAL_STRINGS,
        "a",
        "bc",
        "ди",
        "水",
        "🙂",
        "é",
        "e\u0301",
        "ﬁ",
        "Ａ",  # noqa: RUF001
        "▁",
        "_",
        "<",
        ">",
        "/",
        "Ω",
    ]

    def text() -> str:
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))

    return [(text(), text(), text()) for _ in range(count)]


def frame(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    source, candidate, reference = (list(column) for column in zip(*rows, strict=True))
    return pd.DataFrame({"src_text": source, "mt_text": candidate, "ref_text": reference})


@pytest.fixture(scope="session")
def official_site(request: pytest.FixtureRequest) -> Path:
    """The official versions, installed once into pytest's cache folder."""
    return installed_site(
        request, "metricx-official-tokenizer", OFFICIAL_VERSIONS, "--only-binary=:all:"
    )


def official_ids(site: Path, tokenizer: Path, rows: list[tuple[str, str, str]]) -> dict:
    environment = {
        **os.environ,
        "PYTHONPATH": str(site),
        # transformers 4.30.2's generated protobuf module predates the C++ runtime installed.
        "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", OFFICIAL_SCRIPT],
        input=json.dumps({"tokenizer": str(tokenizer), "rows": rows}),
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    official = json.loads(result.stdout)
    assert official["versions"] == ["4.30.2", "0.13.3"]
    assert official["class"] == "T5TokenizerFast"
    return official


@pytest.fixture(scope="module")
def mt5_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tokenizer of test_metricx.py's tiny checkpoint (`build_tiny_mt5(seed=0)`)."""
    folder = tmp_path_factory.mktemp("tiny-mt5") / "tokenizer"
    train_tokenizer(folder, random.Random(0), 150)
    return folder


def t5_layout_tokenizer(folder: Path) -> Path:
    """A tokenizer whose sentinels are T5Tokenizer's added `<extra_id_N>` tokens (extra_ids
    100), rather than pieces of the sentencepiece model as in mT5's layout."""
    write_t5_sentencepiece(folder, training_lines(random.Random(0)), 150, extra_ids=100)
    return folder


def first_difference(ours: list[int], theirs: list[int]) -> str:
    common = min(len(ours), len(theirs))
    at = next((i for i in range(common) if ours[i] != theirs[i]), common)
    return (
        f"first difference at token {at}: ours {ours[at : at + 5]}, official {theirs[at : at + 5]}"
    )


@pytest.mark.parametrize("layout", ["mt5", "t5"])
def test_token_ids_equal_the_official_pipeline(
    official_site: Path, mt5_tokenizer: Path, tmp_path: Path, layout: str
) -> None:
    folder = mt5_tokenizer if layout == "mt5" else t5_layout_tokenizer(tmp_path / "t5")
    rows = tricky_rows()
    official = official_ids(official_site, folder, rows)

    for mode in ("reference", "qe"):
        metric = MetricX(model="unused", tokenizer=str(folder), qe=mode == "qe", device="cpu")
        ours = metric.encode(frame(rows))
        for row, mine, theirs in zip(rows, ours, official["ids"][mode], strict=True):
            assert mine == theirs, f"{mode} {row!r}: {first_difference(mine, theirs)}"

    tokenizer = build_tokenizer(tokenizer_files(str(folder)), 1536)
    # The score's id is the one the official tokenizer gives the sentinel, 11th from the end.
    expected_score_id = next(i for i in official["score_ids"] if i != official["unk_id"])
    assert score_token_id(tokenizer, str(folder)) == expected_score_id
    assert expected_score_id == tokenizer.get_vocab_size() - 11
    # The cases reach what matters: a kept final ▁, a ▁ before a literal </s>, the cut.
    space, eos = tokenizer.token_to_id("▁"), tokenizer.token_to_id("</s>")
    qe_ids = official["ids"]["qe"]
    assert qe_ids[rows.index(("Bonjour le monde", "Hello world\n", "Hello, world."))][-1] == space
    assert any(space == ids[i] and ids[i + 1] == eos for ids in qe_ids for i in range(len(ids) - 1))
    assert max(len(ids) for ids in official["ids"]["reference"]) == 1535
    assert sum(len(ids) == 1535 for ids in official["ids"]["reference"]) == 6


def test_hub_tokenizer_is_read_from_the_cache_offline(mt5_tokenizer: Path, tmp_path: Path) -> None:
    files = {
        name: (mt5_tokenizer / name).read_bytes()
        for name in ("spiece.model", "tokenizer_config.json")
    }
    cache_entry(tmp_path / "hub", "google/mt5-xl", files)
    program = """
import json, sys
from bouquet_eval.metrics.metricx_tokenizer import build_tokenizer, tokenizer_files
tokenizer = build_tokenizer(tokenizer_files("google/mt5-xl"), 1536)
print(json.dumps(tokenizer.encode(sys.argv[1]).ids))
"""
    text = "source: 你好\n candidate: </s> reference: x "
    environment = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", program, text], env=environment, capture_output=True, text=True
    )

    assert result.returncode == 0, result.stderr
    local = build_tokenizer(tokenizer_files(str(mt5_tokenizer)), 1536)
    assert json.loads(result.stdout) == local.encode(text).ids


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"eos_token": "<eos>"}, "eos_token is '<eos>'"),
        ({"extra_ids": -1}, "extra_ids must be a whole number"),
        ({"extra_ids": "100"}, "extra_ids must be a whole number"),
        ({"extra_ids": 2, "additional_special_tokens": ["<sep>"]}, r"\['<sep>'\] are not"),
    ],
)
def test_tokenizer_config_that_is_not_metricx_is_refused(
    mt5_tokenizer: Path, tmp_path: Path, config: dict, message: str
) -> None:
    shutil.copy(mt5_tokenizer / "spiece.model", tmp_path)
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config))

    with pytest.raises(ValueError, match=message) as raised:
        build_tokenizer(tokenizer_files(str(tmp_path)), 1536)
    assert str(path) in str(raised.value)


def test_missing_or_broken_tokenizer_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"has no spiece\.model"):
        tokenizer_files(str(tmp_path))
    (tmp_path / "spiece.model").write_bytes(b"")
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"tokenizer_config.json: not valid JSON \(.*line 1"):
        tokenizer_files(str(tmp_path))


def test_a_tokenizer_json_is_named_as_unused(
    mt5_tokenizer: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copytree(mt5_tokenizer, tmp_path / "tokenizer")
    (tmp_path / "tokenizer" / "tokenizer.json").write_text("{}")

    with caplog.at_level("WARNING", logger="bouquet_eval.metrics.metricx_tokenizer"):
        files = tokenizer_files(str(tmp_path / "tokenizer"))

    assert files.spiece == (mt5_tokenizer / "spiece.model").read_bytes()
    assert [record.getMessage() for record in caplog.records] == [
        f"metricx tokenizer: {tmp_path / 'tokenizer' / 'tokenizer.json'} is not used; "
        "the tokenizer is built from spiece.model"
    ]
