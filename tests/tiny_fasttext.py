"""Small GlotLID-style fastText models, trained offline, for tests and benchmarks.

Labels follow GlotLID's format, `__label__<iso639-3>_<Script>`. Training lines are drawn with a
fixed seed from word lists written for this file, and fastText trains deterministically with one
thread, a fixed seed and a fresh process (see `_TRAIN`), so a call builds the same model on
every run.

- `build_tiny_model`: ten real language labels, dim 16; trains in a fraction of a second.
- `synthetic_languages` + `train_model`: as many made-up languages as wanted, in 11 scripts,
  for a model shaped like the real GlotLID (see benchmarks/cpu_metrics_throughput.py).
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LABEL_PREFIX = "__label__"

# Each list is a bag of everyday words; the sentences they make are word salad, which is all a
# character n-gram classifier needs. Spanish and Portuguese share a few words on purpose, so
# that some predictions are not near-certain.
TINY_VOCABULARY: dict[str, str] = {
    "eng_Latn": (
        "the house river morning children always water friend because would could night garden "
        "yellow kitchen window through people little before after light walk think brother "
        "sister road city quiet weather"
    ),
    "fra_Latn": (
        "le la les maison rivière matin enfants toujours eau ami parce que nuit jardin jaune "
        "cuisine fenêtre avec beaucoup petit avant après lumière marcher penser frère sœur "
        "chemin ville aujourd'hui"
    ),
    "spa_Latn": (
        "el los casa río mañana niños siempre agua amigo porque noche jardín amarillo cocina "
        "ventana través gente pequeño antes después luz caminar pensar hermano hermana calle "
        "ciudad tranquilo tiempo señora"
    ),
    "por_Latn": (
        "o os casa rio manhã crianças sempre água amigo porque noite jardim amarelo cozinha "
        "janela através pessoas pequeno antes depois luz andar pensar irmão irmã rua cidade "
        "tranquilo você não"
    ),
    "deu_Latn": (
        "der die das Haus Fluss Morgen Kinder immer Wasser Freund weil Nacht Garten gelb Küche "
        "Fenster durch Leute klein vorher nachher Licht gehen denken Bruder Schwester Straße "
        "Stadt ruhig Wetter"
    ),
    "fil_Latn": (
        "ang mga bahay ilog umaga bata palagi tubig kaibigan dahil gabi hardin dilaw kusina "
        "bintana sa tao maliit bago pagkatapos ilaw maglakad isipin kapatid kalye lungsod "
        "tahimik panahon ngayon salamat"
    ),
    "rus_Cyrl": (
        "дом река утро дети всегда вода друг потому что ночь сад жёлтый кухня окно через люди "
        "маленький раньше после свет гулять думать брат сестра дорога город тихий погода "
        "сегодня очень"
    ),
    "fas_Arab": (
        "خانه رودخانه صبح کودک همیشه آب دوست چون شب باغ زرد آشپزخانه پنجره شهر آرام برادر "
        "خواهر راه روشنایی قبل بعد کوچک مردم فکر رفتن امروز هوا خوب است من"
    ),
    "kor_Hang": (
        "오늘 날씨가 좋아요 우리는 친구 집에 강물 아침 아이들 항상 물을 왜냐하면 밤에 정원 노란 "
        "부엌 창문 도시 조용한 형제 자매 걷다 생각 빛 전에 후에 작은 사람들 길 좋아하다"
    ),
    # Chinese is written without spaces: these words are joined as they are drawn.
    "cmn_Hani": (
        "今天 天气 很好 我们 朋友 房子 河流 早上 孩子 总是 喝水 因为 晚上 花园 黄色 厨房 窗户 "
        "城市 安静 兄弟 姐妹 走路 思考 光明 以前 以后 小的 人们 道路 喜欢"
    ),
}

UNSPACED_SCRIPTS = frozenset({"Hani", "Thai", "Jpan"})


@dataclass(frozen=True)
class Language:
    label: str
    """GlotLID-style, without the prefix: `eng_Latn`."""
    words: tuple[str, ...]

    @property
    def script(self) -> str:
        return self.label.rsplit("_", 1)[1]

    @property
    def joiner(self) -> str:
        """What goes between words: nothing in scripts written without spaces."""
        return "" if self.script in UNSPACED_SCRIPTS else " "

    def sentence(self, rng: random.Random, length: int) -> str:
        return self.joiner.join(rng.choices(self.words, k=length))


TINY_LANGUAGES = tuple(
    Language(label, tuple(words.split())) for label, words in TINY_VOCABULARY.items()
)

# Letters to make up syllables from, per script.
SCRIPT_LETTERS: dict[str, str] = {
    "Latn": "abcdefghijklmnopqrstuvwxyzáéíóúàèçñöüãõ",
    "Cyrl": "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "Arab": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "Deva": "कखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह" + "ािीुूेैोौ",
    "Grek": "αβγδεζηθικλμνξοπρστυφχψω",
    "Hebr": "אבגדהוזחטיכלמנסעפצקרשת",
    "Geor": "აბგდევზთიკლმნოპჟრსტუფქღყშჩცძწჭხჯჰ",
    "Ethi": "".join(chr(code) for code in range(0x1200, 0x1258)),
    "Hang": "".join(chr(code) for code in range(0xAC00, 0xAC00 + 400)),
    "Hani": "".join(chr(code) for code in range(0x4E00, 0x4E00 + 600)),
    "Thai": "กขคฆงจฉชซญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮ" + "ะาิีึืุู",
}
# How often each script is drawn for a made-up language: Latin most often, as in BOUQuET.
SCRIPT_WEIGHTS = {"Latn": 12, "Cyrl": 2, "Arab": 2, "Deva": 2, "Hani": 1, "Hang": 1} | {
    script: 1 for script in ("Grek", "Hebr", "Geor", "Ethi", "Thai")
}


def synthetic_languages(count: int, seed: int = 0, words_per_language: int = 300) -> list[Language]:
    """`count` made-up languages with labels `aaa_Latn`, `aab_Cyrl`, ... (distinct codes).

    Each has its own small syllable inventory, so that a model can tell them apart.
    """
    rng = random.Random(seed)
    scripts = rng.choices(list(SCRIPT_WEIGHTS), weights=list(SCRIPT_WEIGHTS.values()), k=count)
    return [
        Language(f"{_code(index)}_{script}", _made_up_words(rng, script, words_per_language))
        for index, script in enumerate(scripts)
    ]


def _code(index: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(letters[index // 26**power % 26] for power in (2, 1, 0))


def _made_up_words(rng: random.Random, script: str, count: int) -> tuple[str, ...]:
    letters = SCRIPT_LETTERS[script]
    syllables = ["".join(rng.sample(letters, rng.randint(1, 3))) for _ in range(40)]
    # Ideographs and Hangul carry a syllable each, so their words are shorter in characters.
    longest = 2 if script in {"Hani", "Hang"} else 4
    lengths = rng.choices(range(1, longest + 1), k=count)
    # Drawn all at once, then cut into words: a benchmark makes millions of them.
    drawn = iter(rng.choices(syllables, k=sum(lengths)))
    return tuple("".join(itertools.islice(drawn, length)) for length in lengths)


def training_lines(
    languages: Sequence[Language], lines_per_language: int, seed: int = 0
) -> list[str]:
    """fastText's supervised format: the label, then the text, one example a line."""
    rng = random.Random(seed)
    lines = [
        f"{LABEL_PREFIX}{language.label} {language.sentence(rng, rng.randint(4, 14))}"
        for language in languages
        for _ in range(lines_per_language)
    ]
    rng.shuffle(lines)
    return lines


# fastText runs in a fresh interpreter for each model: with fasttext-numpy2-wheel 0.9.2, a second
# train_supervised call in one process gave other weights for the same seed, or "Encountered
# NaN" (measured); the first call in a process is reproducible, except with maxn 0 (no
# character n-grams), which varied from run to run.
_TRAIN = """
import json, sys
import fasttext
corpus, output, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
fasttext.train_supervised(input=corpus, verbose=0, **settings).save_model(output)
"""


def train_model(
    path: Path,
    lines: Sequence[str],
    *,
    dim: int,
    bucket: int,
    epoch: int,
    loss: str = "softmax",
    minn: int = 2,
    maxn: int = 5,
    threads: int = 1,
    seed: int = 0,
) -> Path:
    """Train (by default with GlotLID's subword lengths, 2 to 5) and save the .bin to `path`.

    With more than one thread, fastText's result depends on thread timing.
    """
    settings = {
        "dim": dim,
        "bucket": bucket,
        "minn": minn,
        "maxn": maxn,
        "epoch": epoch,
        "lr": 0.5,
        "loss": loss,
        "thread": threads,
        "seed": seed,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch) / "train.txt"
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        subprocess.run(
            [sys.executable, "-c", _TRAIN, str(corpus), str(path), json.dumps(settings)],
            check=True,
        )
    return path


def build_tiny_model(
    path: Path, *, loss: str = "softmax", minn: int = 2, maxn: int = 5, seed: int = 0
) -> Path:
    """The ten `TINY_LANGUAGES`, 40 lines each, dim 16: a file of about 0.35 MB."""
    lines = training_lines(TINY_LANGUAGES, lines_per_language=40, seed=seed)
    return train_model(
        path, lines, dim=16, bucket=5000, epoch=25, loss=loss, minn=minn, maxn=maxn, seed=seed
    )
