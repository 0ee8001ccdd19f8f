"""The workflow's CPU time over the metric's: a copy-source + chrF++ run, and the score jobs'
chrF++ path, against sacreBLEU's bare `sentence_score` loop over the same sentences.

    .venv/bin/python benchmarks/chrf_overhead.py [--directions 1062] [--sentences 854]
        [--shards 8] [--path-directions 48] [--repeats 5]

Builds a dataset of `--directions` x `--sentences` (sentences of 10-40 words), then, in one run:
- the whole workflow (`snakemake`, its default target: translations, scores, aggregates and
  the leaderboard), copy-source + chrF++, `--shards`, one CPU per job, `--cores 2`: the CPU
  time of Snakemake and of every job it starts;
- the bare loop, `CHRF(word_order=2).sentence_score(hypothesis, [reference]).score` for every
  sentence, its CPU time in this process (the sentences read beforehand, not timed), once
  before the run and once after: the same loop's CPU time drifts by 10% and more over minutes
  on a shared machine, and the run is set against the mean of the two;
- the score path: `score_directions`, the score jobs' work once they have started (read and
  check the translations, score, write the metric's columns and the scored files and their
  provenance: a run of chrF++ alone is one family of metrics, whose jobs write both), over
  the first `--path-directions` directions, in this process, taking turns with the bare loop
  over the same sentences `--repeats` times (the least CPU time of each).
Prints both ratios (targets: the whole run at most 1.25x the bare loop, the score path at most
1.1x) and checks that every sentence's chrF++ score is the bare loop's, exactly.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from sacrebleu.metrics import CHRF
from workflow_runs import REPOSITORY, run_snakemake, write_config, write_dataset

from bouquet_eval.data.dataset import Direction, resolve_dataset
from bouquet_eval.data.outputs import score_settings, scored_path, translation_path
from bouquet_eval.metrics import load_metrics
from bouquet_eval.planning.schema import validate_config
from bouquet_eval.scoring.score import score_directions

sys.path.insert(0, str(REPOSITORY))
from tests.synthetic import synthetic_directions

RUN_TARGET = 1.25
PATH_TARGET = 1.1
MODEL = "copy-source"
Sentences = list[tuple[list[str], list[str]]]
"""Per direction: the hypotheses (copy-source: the source texts) and the references."""


def sentences_of(dataset: Path, directions: list[Direction]) -> Sentences:
    frames = [pd.read_parquet(dataset / f"{direction}.parquet") for direction in directions]
    return [(frame["src_text"].tolist(), frame["tgt_text"].tolist()) for frame in frames]


def bare_loop(sentences: Sentences) -> tuple[float, list[list[float]]]:
    """CPU seconds of sacreBLEU's sentence_score over every sentence, and the scores."""
    chrf = CHRF(word_order=2)
    started = time.process_time()
    scores = [
        [
            chrf.sentence_score(hypothesis, [reference]).score
            for hypothesis, reference in zip(hypotheses, references, strict=True)
        ]
        for hypotheses, references in sentences
    ]
    return time.process_time() - started, scores


def check_scores(model_dir: Path, directions: list[Direction], bare: list[list[float]]) -> None:
    for direction, expected in zip(directions, bare, strict=True):
        scored = pd.read_parquet(scored_path(model_dir, direction), columns=["chrfpp"])
        assert scored["chrfpp"].tolist() == expected, f"{direction}: chrF++ scores differ"


def score_path(workdir: Path, directions: list[Direction], scratch: Path) -> float:
    """CPU seconds of the score job's work on `directions`, from the run's translations."""
    config = yaml.safe_load((workdir / "config.yaml").read_text(encoding="utf-8"))
    validate_config(config, REPOSITORY / "workflow" / "schemas" / "config.schema.yaml")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for direction in directions:
        name = translation_path(workdir / "runs" / MODEL, direction).name
        shutil.copy(workdir / "runs" / MODEL / name, scratch / name)
    metrics = load_metrics(config["metrics"], config)
    dataset = resolve_dataset(config["dataset"], fetch=False)
    settings = score_settings(config["metrics"], config)
    started = time.process_time()
    score_directions(directions, scratch, metrics, dataset, settings, None, {})
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--path-directions", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args()
    directions = sorted(synthetic_directions(arguments.directions))
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset, workdir = root / "dataset", root / "work"
        write_dataset(dataset, directions, arguments.sentences)
        write_config(workdir, dataset, shards=arguments.shards)
        sentences = sentences_of(dataset, directions)
        bare_before, bare_scores = bare_loop(sentences)
        run = run_snakemake(workdir)
        bare_after = bare_loop(sentences)[0]
        bare_seconds = (bare_before + bare_after) / 2
        check_scores(workdir / "runs" / MODEL, directions, bare_scores)

        sample = directions[: arguments.path_directions]
        sample_sentences = sentences_of(dataset, sample)
        path_runs, bare_runs = [], []
        for _ in range(arguments.repeats):
            path_runs.append(score_path(workdir, sample, root / "path"))
            bare_runs.append(bare_loop(sample_sentences)[0])
        check_scores(root / "path", sample, bare_scores[: len(sample)])

    segments = len(directions) * arguments.sentences
    run_ratio, path_ratio = run.cpu_seconds / bare_seconds, min(path_runs) / min(bare_runs)
    print(f"{len(directions)} directions x {arguments.sentences} sentences ({segments:,} "
          f"segments), copy-source + chrF++, {arguments.shards} shards, --cores 2")  # fmt: skip
    print(f"whole run: {run.cpu_seconds:.1f} CPU-s ({run.wall_seconds:.0f} s wall); bare loop "
          f"{bare_seconds:.1f} CPU-s ({bare_before:.1f} before the run, {bare_after:.1f} after); "
          f"ratio {run_ratio:.2f} (target <= {RUN_TARGET}: "
          f"{'met' if run_ratio <= RUN_TARGET else 'NOT met'})")  # fmt: skip
    print(f"score path, {len(sample)} directions, least of {arguments.repeats}: "
          f"{min(path_runs):.2f} CPU-s; bare loop {min(bare_runs):.2f} CPU-s; ratio "
          f"{path_ratio:.2f} (target <= {PATH_TARGET}: "
          f"{'met' if path_ratio <= PATH_TARGET else 'NOT met'})")  # fmt: skip
    print("chrF++ of every sentence identical to sentence_score's")


if __name__ == "__main__":
    main()
