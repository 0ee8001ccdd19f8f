"""Synthetic BOUQuET-shaped datasets of any size, for scale tests and benchmarks."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bouquet_eval.data.dataset import Direction


def synthetic_directions(count: int) -> list[Direction]:
    codes = [f"{a}{b}x_Latn" for a, b in itertools.product("abcdefgh", repeat=2)]
    pairs = itertools.permutations(codes, 2)
    return [Direction(s, t) for s, t in itertools.islice(pairs, count)]


DOMAINS = ("conversation", "news", "social")
REGISTERS = ("formal", "informal")


def write_dataset(
    folder: Path, directions: list[Direction], sentences: int = 2, facets: bool = False
) -> None:
    """One parquet file per direction; `facets`: with BOUQuET's `domain` and `register`."""
    folder.mkdir(parents=True)
    for direction in directions:
        columns = {
            "src_lang": [direction.src_lang] * sentences,
            "tgt_lang": [direction.tgt_lang] * sentences,
            "src_text": [f"sentence number {i} of the source." for i in range(sentences)],
            "tgt_text": [f"the reference of sentence {i}." for i in range(sentences)],
            "uniq_id": [f"s{i}" for i in range(sentences)],
        }
        if facets:
            columns["domain"] = [DOMAINS[i % len(DOMAINS)] for i in range(sentences)]
            columns["register"] = [REGISTERS[i % len(REGISTERS)] for i in range(sentences)]
        pq.write_table(pa.table(columns), folder / f"{direction}.parquet")


ENGLISH = "eng_Latn"
HUBS = 12
"""Languages that the regional pairs of `bouquet_shaped_directions` connect the others to."""


def real_language_codes(count: int) -> list[str]:
    """`count` BOUQuET-style codes of real languages (ISO 639-3 and their usual script, from
    CLDR's likely subtags), English first, so that names, scripts and regions resolve."""
    import langcodes

    codes = [ENGLISH]
    for tag in sorted(langcodes.LIKELY_SUBTAGS):
        language = langcodes.Language.get(tag)
        if language.script or language.territory or not language.language or "-" in tag:
            continue
        script = langcodes.Language.get(langcodes.LIKELY_SUBTAGS[tag]).script
        code = f"{language.to_alpha3()}_{script}" if script else None
        if code and code not in codes:
            codes.append(code)
        if len(codes) == count:
            return codes
    raise ValueError(f"only {len(codes)} languages known")


def bouquet_shaped_directions(languages: int = 268, total: int = 1062) -> list[Direction]:
    """BOUQuET's shape: every language into and out of English, then regional pairs (each of
    the others with one of `HUBS` languages, both ways; the hubs with each other) up to `total`."""
    codes = real_language_codes(languages)
    others = codes[1:]
    directions = [Direction(c, ENGLISH) for c in others] + [Direction(ENGLISH, c) for c in others]
    hubs, spokes = others[:HUBS], others[HUBS:]
    regional = [
        pair
        for i, spoke in enumerate(spokes)
        for pair in (Direction(spoke, hubs[i % HUBS]), Direction(hubs[i % HUBS], spoke))
    ]
    regional += [Direction(a, b) for a, b in itertools.permutations(hubs, 2)]
    return directions + regional[: total - len(directions)]


def write_model_run(
    folder: Path, directions: list[Direction], sentences: int, shift: float, seed: int
) -> None:
    """A model's scored_rows.parquet, scores.csv and resampled.npz (made by the aggregation's
    own code, with the default statistics) and report_extract.parquet (by its job's) for
    `directions`: texts of a realistic length, chrF++ around 50 + shift, MetricX, and a
    `quality` per direction so that languages differ."""
    import numpy as np
    import pandas as pd

    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.aggregate import ROW_GROUP_ROWS, direction_table
    from bouquet_eval.results.extracts import EXTRACT_FILE, model_extract
    from bouquet_eval.results.resampled import RESAMPLED_FILE

    rng = np.random.default_rng(seed)
    quality = np.random.default_rng(0).uniform(-25, 25, size=len(directions))
    count = len(directions) * sentences
    src = np.repeat([d.src_lang for d in directions], sentences)
    tgt = np.repeat([d.tgt_lang for d in directions], sentences)
    ids = np.tile([f"s{i}" for i in range(sentences)], len(directions))
    chrf = np.clip(
        50 + shift + np.repeat(quality, sentences) + rng.normal(0, 15, size=count), 0, 100
    )
    text = "the report of every sentence in each language keeps its meaning and tone " * 2
    rows = pd.DataFrame(
        {
            "src_lang": src,
            "tgt_lang": tgt,
            "src_text": [f"{i} {text}" for i in ids],
            "ref_text": [f"{i} {text[::-1]}" for i in ids],
            "mt_text": [f"{i} {text[: 40 + int(c)]}" for i, c in zip(ids, chrf, strict=True)],
            "uniq_id": ids,
            "chrfpp": chrf,
            "metricx": np.clip(25 - chrf / 4 + rng.normal(0, 1, size=count), 0, 25),
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    # Row groups as the aggregation writes them (several directions each).
    rows.to_parquet(folder / "scored_rows.parquet", index=False, row_group_size=ROW_GROUP_ROWS)
    table = direction_table(rows, ["chrfpp", "metricx"], Resampling())
    table.scores.to_csv(folder / "scores.csv", index=False)
    table.resampled.write(folder / RESAMPLED_FILE)
    extract = model_extract(folder / "scored_rows.parquet", ["chrfpp", "metricx"], {"metricx"})
    extract.write(folder / EXTRACT_FILE)


def write_shaped_run(
    root: Path, models: list[str], sentences: int, directions: list[Direction]
) -> dict[str, float]:
    """An output folder as the workflow leaves it for the report and the browser: per model
    scored_rows.parquet, scores.csv, timing.csv and a manifest naming a local dataset (with
    domain and register), then leaderboard.csv and the report's pages under report/, made by
    the workflow's own code. Returns the seconds each step took."""
    import json
    import time

    import pandas as pd

    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.extracts import EXTRACT_FILE
    from bouquet_eval.results.figures import write_heatmaps
    from bouquet_eval.results.leaderboard import build_leaderboard, read_results, write_leaderboard
    from bouquet_eval.results.paths import figure_paths
    from bouquet_eval.results.report import RunRecords, write_figures
    from bouquet_eval.results.resampled import RESAMPLED_FILE

    seconds = {}
    started = time.perf_counter()
    write_dataset(root / "dataset", directions, sentences, facets=True)
    output = root / "runs"
    for number, model in enumerate(models):
        folder = output / model
        write_model_run(folder, directions, sentences, shift=-3.0 * number, seed=number)
        manifest = {"entries": [{"dataset": {"path": str(root / "dataset")}}]}
        (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    seconds["synthetic run"] = time.perf_counter() - started

    started = time.perf_counter()
    columns, lower = ["chrfpp", "metricx"], {"metricx"}
    rows = {m: output / m / "scored_rows.parquet" for m in models}
    resampling = Resampling()
    files = [(output / m / "scores.csv", rows[m], output / m / RESAMPLED_FILE) for m in models]
    results = read_results(models, files, columns, resampling)
    board = build_leaderboard(results, columns, lower, resampling)
    write_leaderboard(board, output / "leaderboard.csv", output / "leaderboard.md", lower)
    seconds["leaderboard"] = time.perf_counter() - started

    started = time.perf_counter()
    timing = pd.DataFrame({"seconds": [2.0, 3.0], "sentences_per_second": [4.0, 5.0]})
    run = RunRecords(
        timing={m: timing for m in models},
        gpus={m: 0 for m in models},
        config={"dataset": {"name": "facebook/bouquet", "path": str(root / "dataset")}},
        manifests={m: json.loads((output / m / "manifest.json").read_text()) for m in models},
    )
    paths = figure_paths(output / "report", models, columns, [str(d) for d in directions])
    extracts = {m: output / m / EXTRACT_FILE for m in models}
    write_figures(paths, board, results, rows, run, lower, resampling, models[-1], extracts)
    for result in results:
        heatmaps = {c: paths["heatmaps"][result.name, c] for c in columns}
        write_heatmaps(heatmaps, result.scores, result.name, lower)
    seconds["report pages"] = time.perf_counter() - started
    return seconds
