"""The interactive pages of the report: every direction of every model, and sentences.

BOUQuET pairs about 268 languages with English both ways and adds some regional pairs: about
1062 directions, too many for one figure. These pages hold the numbers as JSON and draw them
as sortable, filterable tables (Tabulator, vendored in `assets/tabulator`, inlined so that
nothing is fetched when the report opens): scores into and out of English per language, the
regional pairs, every direction of every model, and each model's differences from a baseline.
The sentence page holds what fits in a report: each model's worst sentences per direction and
one sample sentence per direction with every model's output; `bouquet_eval.results.browse`
serves all of them from the run's files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bouquet_eval.core.languages import LanguageCode
from bouquet_eval.metrics.records import DEFAULT_DECIMALS, builtin_decimals
from bouquet_eval.results.aggregate import ENGLISH, GROUP_COLUMNS
from bouquet_eval.results.rendering import (
    ABRIDGED_CHARACTERS,
    PAGE_BYTES,
    abridged,
    interactive_page,
)

WORST_SENTENCES = 3
"""Per model and direction, how many of its worst sentences the report's sentence page holds."""
DECIMALS = 4


@dataclass(frozen=True)
class LanguageInfo:
    code: str
    name: str
    script: str
    region: str
    """The territory where the language is most spoken (CLDR likely subtags); empty if unknown."""


@cache
def describe_language(code: str) -> LanguageInfo:
    """Name, script name and region of a BOUQuET code (langcodes' CLDR data)."""
    import langcodes

    from bouquet_eval.translators.prompt import language_name

    parsed = LanguageCode.parse(code)
    script = langcodes.Language.get(f"und-{parsed.script}").script_name()
    region = ""
    # Only languages in the likely-subtags table have a known territory; for the others
    # langcodes would fall back on English's (the United States). An individual language
    # absent from the table (swh) takes its macrolanguage's (sw).
    likely = langcodes.LIKELY_SUBTAGS.get(
        langcodes.standardize_tag(parsed.language)
    ) or langcodes.LIKELY_SUBTAGS.get(langcodes.standardize_tag(parsed.language, macro=True))
    if likely:
        territory = langcodes.Language.get(likely).territory
        name = langcodes.Language.get(f"und-{territory}").territory_name() if territory else ""
        # CLDR's likely subtags name no territory for some languages ("ZZ", unknown region).
        region = "" if name.startswith("Unknown") else name
    return LanguageInfo(code, language_name(code), script, region)


def direction_kind(src_lang: str, tgt_lang: str) -> str:
    if tgt_lang == ENGLISH:
        return "into English"
    if src_lang == ENGLISH:
        return "out of English"
    return "regional"


def rounded_scores(values: np.ndarray) -> list[float | None]:
    """Each value as `round(value, DECIMALS)` gives it, None where it is not finite: the
    pages hold hundreds of thousands of scores at BOUQuET's size (millions at 20 models).

    `round` is the double nearest to the value's correctly rounded decimal: `rint(value *
    10**DECIMALS) / 10**DECIMALS` is that double (the division is correctly rounded) wherever
    the product's rounding cannot move it across a half; values within `_HALF_MARGIN` of a
    half, large ones and the not finite are left to `round` itself."""
    values = np.asarray(values, dtype=np.float64)
    scale = 10.0**DECIMALS
    scaled = values * scale
    with np.errstate(invalid="ignore"):
        fraction = np.abs(scaled - np.floor(scaled))
        exact = (np.abs(scaled) < _EXACT_SCALED) & (np.abs(fraction - 0.5) > _HALF_MARGIN)
    rounded: list[Any] = (np.rint(scaled) / scale).tolist()
    for index in np.flatnonzero(~exact).tolist():
        value = float(values[index])
        rounded[index] = round(value, DECIMALS) if math.isfinite(value) else None
    return rounded


_EXACT_SCALED = 2.0**30
"""Below it, a product's rounding error (half an ulp: at most 2**-23) is far inside
`_HALF_MARGIN`."""
_HALF_MARGIN = 1e-6


def results_data(
    scores_by_model: Mapping[str, pd.DataFrame],
    models: Sequence[str],
    columns: Sequence[str],
    lower: set[str],
    primary: str,
    versus: pd.DataFrame | None,
    decimals: Mapping[str, int] | None = None,
    targets: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """What the results page draws, as compact JSON-ready lists.

    `scores[metric][model]` is three lists (mean, interval low, interval high) aligned with
    `directions`; `versus` (see `compare.compare_models`) gives each model's difference from
    the baseline per direction with its raw and corrected p-values; `decimals` each metric's
    decimal places, from its record (`leaderboard.report_decimals`; the built-in metrics'
    where not given); `targets` the columns whose best value is a target, with it
    (`leaderboard.target_columns`): the page sorts and judges them by the distance to it.
    """
    places = {**builtin_decimals(), **(decimals or {})}
    directions = sorted(
        {(s, t) for m in models for s, t in zip(scores_by_model[m]["src_lang"],
                                               scores_by_model[m]["tgt_lang"], strict=True)}
    )  # fmt: skip
    index = pd.MultiIndex.from_tuples(directions, names=GROUP_COLUMNS)
    scores: dict[str, dict[str, list[list[float | None]]]] = {}
    sentences: list[int | None] = [None] * len(directions)
    for model in models:
        table = scores_by_model[model].set_index(GROUP_COLUMNS).reindex(index)
        counts = table["n_sentences"].to_numpy(dtype=float)
        sentences = [
            old if old is not None else (None if math.isnan(c) else int(c))
            for old, c in zip(sentences, counts, strict=True)
        ]
        for column in columns:
            if column not in table:
                continue
            triple = [
                table[name].to_numpy(dtype=float) if name in table else np.full(len(index), np.nan)
                for name in (column, f"{column}_ci_low", f"{column}_ci_high")
            ]
            scores.setdefault(column, {})[model] = [rounded_scores(values) for values in triple]
    languages = sorted({code for pair in directions for code in pair})
    data: dict[str, Any] = {
        "models": list(models),
        "metrics": [c for c in columns if c in scores],
        "lower": sorted(lower),
        "targets": {c: float(t) for c, t in (targets or {}).items() if c in columns},
        "decimals": {c: places.get(c, DEFAULT_DECIMALS) for c in columns},
        "primary": primary,
        "english": ENGLISH,
        "languages": {
            code: [info.name, info.script, info.region]
            for code, info in ((c, describe_language(c)) for c in languages)
        },
        "directions": [[s, t, n] for (s, t), n in zip(directions, sentences, strict=True)],
        "scores": scores,
        "versus": None,
    }
    if versus is not None and len(versus):
        data["versus"] = versus_data(versus, index)
    return data


def versus_data(versus: pd.DataFrame, index: pd.MultiIndex) -> dict[str, Any]:
    """Per compared model: delta, raw p and corrected p per direction (aligned with `index`)."""
    per_direction = versus[versus["src_lang"] != "all"]
    systems: dict[str, list[list[float | None]]] = {}
    for system, rows in per_direction.groupby("system", sort=False):
        table = rows.set_index(GROUP_COLUMNS).reindex(index)
        systems[str(system)] = [
            rounded_scores(table[name].to_numpy(dtype=float))
            for name in ("delta", "p_paired_bootstrap", "p_paired_bootstrap_bh")
        ]
    return {
        "baseline": str(versus["baseline"].iloc[0]),
        "metric": str(versus["metric"].iloc[0]),
        "systems": systems,
    }


def results_page(data: dict[str, Any]) -> str:
    return interactive_page("results.html", "Results by language and direction", data, "results.js")


# --- Sentences ------------------------------------------------------------------------------

TEXT_COLUMNS = ("src_text", "ref_text", "mt_text")


def worst_sentences(rows: pd.DataFrame, column: str, lower: bool, count: int) -> pd.DataFrame:
    """The `count` worst-scored sentences of each direction on `column` (missing scores last)."""
    usable = rows[[*GROUP_COLUMNS, "uniq_id", column]].dropna(subset=[column])
    direction = usable.groupby(GROUP_COLUMNS, sort=False).ngroup().to_numpy()
    scores = usable[column].to_numpy(dtype=float)
    # By direction, then worst first; ties in the rows' order (lexsort is stable).
    order = np.lexsort((-scores if lower else scores, direction))
    starts = np.searchsorted(direction[order], direction[order])
    return usable.iloc[order[np.arange(order.size) - starts < count]]


def sample_sentences(rows: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """One sentence per direction, drawn with a fixed seed (the same for every model)."""
    keys = rows[[*GROUP_COLUMNS, "uniq_id"]]
    shuffled = keys.sample(frac=1.0, random_state=seed)
    return shuffled.groupby(GROUP_COLUMNS, sort=False).head(1)


def read_texts(path: Path, wanted: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The `columns` of the rows of `wanted` (direction and uniq_id) in a scored_rows file.

    The rows are picked out by pyarrow, a batch at a time, before anything becomes Python
    objects: a model's file holds about 900,000 rows and their texts, the report a few
    thousand of them."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    keys = wanted[[*GROUP_COLUMNS, "uniq_id"]].astype(str).drop_duplicates()
    wanted_keys = pa.array(
        (keys["src_lang"] + "\x1f" + keys["tgt_lang"] + "\x1f" + keys["uniq_id"]).tolist()
    )
    with pq.ParquetFile(path) as scored:
        read = [c for c in columns if c in scored.schema_arrow.names]
        chosen = []
        for batch in scored.iter_batches(columns=[*GROUP_COLUMNS, "uniq_id", *read]):
            table = pa.Table.from_batches([batch])
            joined = pc.binary_join_element_wise(
                *(pc.cast(table[name], pa.string()) for name in (*GROUP_COLUMNS, "uniq_id")),
                "\x1f",
            )
            chosen.append(table.filter(pc.is_in(joined, value_set=wanted_keys)))
    if not chosen:  # a file without rows
        return keys.assign(**dict.fromkeys(read))
    found = pa.concat_tables(chosen, promote_options="permissive").to_pandas()
    found[["src_lang", "tgt_lang", "uniq_id"]] = found[["src_lang", "tgt_lang", "uniq_id"]].astype(
        str
    )
    return keys.merge(found, on=[*GROUP_COLUMNS, "uniq_id"], how="left")


def sentences_data(
    rows_by_model: Mapping[str, pd.DataFrame],
    paths: Mapping[str, Path],
    models: Sequence[str],
    column: str,
    lower: bool,
) -> dict[str, Any]:
    """`sentences_json` from the models' rows: their worst sentences on `column` and the
    first model's sample, their texts and every model's score of them read from the
    scored_rows files in `paths`."""
    worst = {
        model: worst_sentences(rows_by_model[model], column, lower, WORST_SENTENCES)
        for model in models
    }
    sample = sample_sentences(rows_by_model[models[0]])
    wanted = wanted_sentences(worst, sample)
    base = read_texts(paths[models[0]], wanted, ("src_text", "ref_text"))
    for model in models:
        outputs = read_texts(paths[model], wanted, ("mt_text", column))
        base = base.merge(
            outputs.rename(columns={"mt_text": f"mt|{model}", column: f"score|{model}"}),
            on=[*GROUP_COLUMNS, "uniq_id"],
            how="left",
        )
    return sentences_json(worst, sample, base, models, column, lower)


def wanted_sentences(worst: Mapping[str, pd.DataFrame], sample: pd.DataFrame) -> pd.DataFrame:
    """The sentences the page holds, once each: every model's worst, then the sample."""
    wanted = pd.concat([*worst.values(), sample])[[*GROUP_COLUMNS, "uniq_id"]]
    return wanted.astype({"uniq_id": str}).drop_duplicates()


def sentences_json(
    worst: Mapping[str, pd.DataFrame],
    sample: pd.DataFrame,
    base: pd.DataFrame,
    models: Sequence[str],
    column: str,
    lower: bool,
) -> dict[str, Any]:
    """Per direction: its chosen sentences (source, reference, each model's output and score),
    each model's worst ones (`worst`, as `worst_sentences` gives them) and the sample
    (`sample_sentences`); `base` holds one row per sentence of `wanted_sentences`, in its
    order: its keys, `src_text`, `ref_text`, and per model `mt|<model>` and `score|<model>`.
    Texts are stored once per sentence, and a model's output only where the page shows it
    (the sample, and that model's worst sentences), so that the page grows with the number of
    models, not with its square."""
    samples = set(map(tuple, sample[[*GROUP_COLUMNS, "uniq_id"]].astype(str).to_numpy()))
    shown = {
        model: samples | set(map(tuple, chosen[[*GROUP_COLUMNS, "uniq_id"]].astype(str).to_numpy()))
        for model, chosen in worst.items()
    }
    ordered = base.sort_values(GROUP_COLUMNS, kind="stable")
    count = len(ordered)

    def values(name: str) -> list[Any]:
        return ordered[name].tolist() if name in ordered else [None] * count

    def text(value: Any) -> str | None:
        # A missing text (an output never made) is NaN in a merged column: JSON's null.
        return value if isinstance(value, str) else None

    def texts(name: str) -> list[str | None]:
        return [text(value) for value in values(name)]

    keys = list(zip(*(map(str, values(name)) for name in (*GROUP_COLUMNS, "uniq_id")), strict=True))
    scores = np.full((count, len(models)), np.nan)
    for position, model in enumerate(models):
        if f"score|{model}" in ordered:
            scores[:, position] = ordered[f"score|{model}"].to_numpy(dtype=float)
    rounded = rounded_scores(scores.ravel())
    # Each model's outputs where the page shows them (a few of its rows), found at once per
    # model by their joined keys; the others stay None.
    joined = pd.Series(["\x1f".join(key) for key in keys], dtype=object)
    outputs = np.full((count, len(models)), None, dtype=object)
    for position, model in enumerate(models):
        visible = np.flatnonzero(joined.isin(["\x1f".join(key) for key in shown[model]]))
        if f"mt|{model}" in ordered:
            made = ordered[f"mt|{model}"].to_numpy(dtype=object)[visible]
            outputs[visible, position] = [text(value) for value in made]
    by_row = outputs.tolist()
    directions: dict[str, dict[str, Any]] = {}
    for row, (key, source, reference) in enumerate(
        zip(keys, texts("src_text"), texts("ref_text"), strict=True)
    ):
        entry = directions.setdefault(f"{key[0]}-{key[1]}", {"sentences": {}, "worst": {}})
        entry["sentences"][key[2]] = [
            source,
            reference,
            by_row[row],
            rounded[row * len(models) : (row + 1) * len(models)],
        ]
    for model, chosen in worst.items():
        # By direction in the order they come, each direction's in its order.
        for src, tgt, uniq_id in chosen[[*GROUP_COLUMNS, "uniq_id"]].to_numpy(dtype=object):
            directions[f"{src}-{tgt}"]["worst"].setdefault(model, []).append(str(uniq_id))
    for record in sample.to_dict(orient="records"):
        directions[f"{record['src_lang']}-{record['tgt_lang']}"]["sample"] = str(record["uniq_id"])
    languages = sorted({code for name in directions for code in name.split("-")})
    return {
        "models": list(models),
        "metric": column,
        "lower": lower,
        "languages": {c: describe_language(c).name for c in languages},
        "directions": directions,
    }


# About what one model's sentences of one direction take on a page (its worst sentences and
# its share of the sample, with their sources and references), from BOUQuET's texts.
BYTES_PER_MODEL_DIRECTION = 2_500


def language_of_interest(direction: str) -> str:
    """The language a reader of a direction looks for: the one other than English (the source
    of a pair without English)."""
    src, tgt = direction.split("-")
    return tgt if src == ENGLISH else src


@dataclass(frozen=True)
class SentencePart:
    """The directions of one sentences page: those of a range of languages (`language_of_interest`,
    in order of their code)."""

    number: int
    count: int
    directions: tuple[str, ...]

    @property
    def languages(self) -> tuple[str, str]:
        """The first and last languages of the part."""
        return (
            language_of_interest(self.directions[0]),
            language_of_interest(self.directions[-1]),
        )

    @property
    def label(self) -> str:
        first, last = self.languages
        return first if first == last else f"{first} to {last}"


def sentence_parts(directions: Sequence[str], models: int) -> list[SentencePart]:
    """The directions of each sentences page, grouped by `language_of_interest`, each page's
    share of `BYTES_PER_MODEL_DIRECTION` under `rendering.PAGE_BYTES` (with room to spare),
    the directions being spread over as many pages as that takes."""
    by_language: dict[str, list[str]] = {}
    for direction in sorted(directions, key=lambda d: (language_of_interest(d), d)):
        by_language.setdefault(language_of_interest(direction), []).append(direction)
    estimate = len(directions) * max(models, 1) * BYTES_PER_MODEL_DIRECTION
    count = min(len(by_language), math.ceil(estimate / (0.7 * PAGE_BYTES))) or 1
    share = len(directions) / count
    parts: list[list[str]] = [[]]
    for group in by_language.values():
        if parts[-1] and len(parts) < count and len(parts[-1]) + len(group) / 2 > share:
            parts.append([])
        parts[-1].extend(group)
    return [SentencePart(n, len(parts), tuple(p)) for n, p in enumerate(parts, start=1)]


def part_of(
    data: dict[str, Any], part: SentencePart, worst: int, abridge: bool = False
) -> dict[str, Any]:
    """The sentences of `part`'s directions in `data` (see `sentences_data`), with at most
    `worst` worst sentences per model, and, where `abridge`, their texts `abridged`."""
    directions = {}
    for name in part.directions:
        entry = data["directions"].get(name)
        if entry is None:
            continue
        if worst >= WORST_SENTENCES and not abridge:
            # It holds no more worst sentences than these (`sentences_json`), each kept whole.
            directions[name] = entry
            continue
        kept = {model: ids[:worst] for model, ids in entry["worst"].items()}
        wanted = {id for ids in kept.values() for id in ids} | {entry.get("sample")}
        directions[name] = {
            **entry,
            "worst": kept,
            "sentences": {
                k: abridged(v) if abridge else v
                for k, v in entry["sentences"].items()
                if k in wanted
            },
        }
    languages = {code for name in directions for code in name.split("-")}
    return {
        **data,
        "part": [part.number, part.count, part.label],
        "worst": worst,
        "abridged": ABRIDGED_CHARACTERS if abridge else None,
        "languages": {c: n for c, n in data["languages"].items() if c in languages},
        "directions": directions,
    }


def sentences_pages(data: dict[str, Any], parts: Sequence[SentencePart]) -> list[str]:
    """One page per part, each under `PAGE_BYTES`: a part whose texts are longer than foreseen
    shows them cut (texts of thousands of characters, which `bouquet-eval browse` shows
    whole), then fewer worst sentences per model, and says so."""
    tries = [(WORST_SENTENCES, False)] + [(w, True) for w in range(WORST_SENTENCES, -1, -1)]
    pages = []
    for part in parts:
        for worst, abridge in tries:
            text = sentences_page(part_of(data, part, worst, abridge))
            if len(text.encode("utf-8")) <= PAGE_BYTES:
                break
        pages.append(text)
    return pages


def sentences_page(data: dict[str, Any]) -> str:
    _, count, label = data["part"]
    title = "Sentences" if count == 1 else f"Sentences: {label}"
    return interactive_page("sentences.html", title, data, "sentences.js", tables=False)
