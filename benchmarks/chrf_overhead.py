"""The workflow's CPU time over the metric's: a copy-source + chrF++ run, and the score jobs'
chrF++ path, against sacreBLEU's bare `sentence_score` loop over the same sentences, on an
idle machine and beside CPU-burning neighbours.

    .venv/bin/python benchmarks/chrf_overhead.py [--directions 1062] [--sentences 854]
        [--shards auto] [--cores 2] [--runs 3] [--conditions idle,loaded]
        [--path-directions 48] [--repeats 5]

Builds a dataset of `--directions` x `--sentences` (sentences of 10-40 words), then, under each
of `--conditions`, `--runs` times:
- the whole workflow (`snakemake`, its default target: translations, scores, aggregates and
  the leaderboard), copy-source + chrF++, `--shards` (the configuration's default: `auto`,
  which fits the jobs to the cores), one CPU per job, `--cores`: the CPU time of Snakemake and
  of every job it starts, and that of Snakemake's main process apart (its own CPU time, its
  threads included: what grew with the wall time while jobs waited for a core);
- the bare loop, `CHRF(word_order=2).sentence_score(hypothesis, [reference]).score` for every
  sentence, split into `--cores` processes as the run's jobs are (each its share of the
  directions, read beforehand, not timed; their CPU times summed), before the first run and
  after each: the same loop's CPU time drifts by 10% and more over minutes on a shared
  machine, and each run is set against the mean of the loops on either side.
`loaded` starts a CPU-burning neighbour process per core of the machine (a busy loop at the
same priority) before its bare loop and stops them after its last run: both sides share the
cores with the same neighbours. `idle` starts none; on a machine others use, it is as idle as
they leave it: the load average is printed beside each run.

Then the score path, from the last run's translations: `score_directions`, the score jobs'
work once they have started (parse the translations that the translate jobs wrote and
checked, score, write the metric's columns and the scored files and their provenance: a run
of chrF++ alone is one family of metrics, whose jobs write both), over the first
`--path-directions` directions, in this process, taking turns with the bare loop over the
same sentences (in this process too) `--repeats` times (the least CPU time of each), without
neighbours.

Prints each run's ratio and the main process's share, and for each condition the least, the
median and the largest ratio (targets: the whole run at most 1.25x the bare loop in each
condition, the score path at most 1.1x), and checks that every sentence's chrF++ score is the
bare loop's, exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml
from sacrebleu.metrics import CHRF
from workflow_runs import REPOSITORY, Usage, run_snakemake, write_config, write_dataset

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


def bare_share(dataset: Path, directions: list[Direction]) -> tuple[float, list[list[float]]]:
    return bare_loop(sentences_of(dataset, directions))


def bare_loops(
    dataset: Path, directions: list[Direction], processes: int
) -> tuple[float, list[list[float]]]:
    """The bare loop over `directions` in `processes` processes, each over its share of them:
    their CPU seconds summed, and the scores in the order of `directions`."""
    size = -(-len(directions) // processes)
    shares = [directions[first : first + size] for first in range(0, len(directions), size)]
    with ProcessPoolExecutor(len(shares)) as pool:
        done = list(pool.map(bare_share, [dataset] * len(shares), shares))
    return sum(seconds for seconds, _ in done), [score for _, scores in done for score in scores]


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
    (scratch / ".provenance").mkdir()
    for direction in directions:
        # With the translate job's record, kept as it is: the score job only parses what it
        # wrote (its record and content unchanged).
        name = translation_path(workdir / "runs" / MODEL, direction).name
        shutil.copy2(workdir / "runs" / MODEL / name, scratch / name)
        record = Path(".provenance") / f"{name}.json"
        shutil.copy2(workdir / "runs" / MODEL / record, scratch / record)
    metrics = load_metrics(config["metrics"], config)
    dataset = resolve_dataset(config["dataset"], fetch=False)
    settings = score_settings(config["metrics"], config)
    started = time.process_time()
    score_directions(directions, scratch, metrics, dataset, settings, None, {})
    return time.process_time() - started


@contextlib.contextmanager
def neighbours(count: int) -> Iterator[None]:
    """`count` processes that burn a core each, at this process's priority, for the block."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


@dataclass(frozen=True)
class Measured:
    condition: str
    run: Usage
    bare_seconds: float
    load_before: str
    load_after: str

    @property
    def ratio(self) -> float:
        return self.run.cpu_seconds / self.bare_seconds


def measure(condition: str, runs: int, root: Path, dataset: Path, settings: dict) -> list[Measured]:
    """`runs` whole runs, each in a fresh working directory, between bare loops; every run's
    scores are checked against the first loop's. The last run's directory is kept (the score
    path reads its translations)."""
    measured = []
    cores, directions = settings["cores"], settings["directions"]
    seconds, scores = bare_loops(dataset, directions, cores)
    bare = [seconds]
    for number in range(runs):
        workdir = root / f"{condition}-{number}"
        shutil.rmtree(root / "last-run", ignore_errors=True)
        write_config(workdir, dataset, **settings["config"])
        before = load()
        run = run_snakemake(workdir, cores=cores)
        after = load()
        bare.append(bare_loops(dataset, directions, cores)[0])
        measured.append(Measured(condition, run, (bare[-2] + bare[-1]) / 2, before, after))
        print(report(measured[-1]), flush=True)
        check_scores(workdir / "runs" / MODEL, directions, scores)
        workdir.rename(root / "last-run")
    return measured


def report(measured: Measured) -> str:
    run = measured.run
    return (
        f"{measured.condition}: whole run {run.cpu_seconds:.1f} CPU-s ({run.wall_seconds:.0f} s "
        f"wall), Snakemake's main process {run.main_cpu_seconds:.1f} of them; bare loop "
        f"{measured.bare_seconds:.1f} CPU-s; ratio {measured.ratio:.3f} ({measured.load_before}"
        f" before, {measured.load_after} after)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--shards", default="auto", help="a number, per-direction or auto")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--conditions", default="idle,loaded")
    parser.add_argument("--path-directions", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args()
    directions = sorted(synthetic_directions(arguments.directions))
    shards = int(arguments.shards) if arguments.shards.isdigit() else arguments.shards
    conditions = arguments.conditions.split(",")
    cores = os.cpu_count() or 1
    print(f"{len(directions)} directions x {arguments.sentences} sentences, copy-source + "
          f"chrF++, shards: {shards}, --cores {arguments.cores}, {cores} cores on the machine; "
          f"{load()}", flush=True)  # fmt: skip
    measured: list[Measured] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset = root / "dataset"
        write_dataset(dataset, directions, arguments.sentences)
        settings = {
            "config": {"shards": shards},
            "cores": arguments.cores,
            "directions": directions,
        }
        for condition in conditions:
            with neighbours(cores if condition == "loaded" else 0):
                measured += measure(condition, arguments.runs, root, dataset, settings)

        sample = directions[: arguments.path_directions]
        sample_sentences = sentences_of(dataset, sample)
        path_runs, bare_runs = [], []
        for _ in range(arguments.repeats):
            path_runs.append(score_path(root / "last-run", sample, root / "path"))
            seconds, sample_scores = bare_loop(sample_sentences)
            bare_runs.append(seconds)
        check_scores(root / "path", sample, sample_scores)

    print()
    for condition in conditions:
        ratios = sorted(m.ratio for m in measured if m.condition == condition)
        main_share = [m.run.main_cpu_seconds for m in measured if m.condition == condition]
        worst = max(ratios)
        verdict = "met" if worst <= RUN_TARGET else "NOT met"
        print(f"{condition}, {len(ratios)} runs: whole run {ratios[0]:.3f} / "
              f"{statistics.median(ratios):.3f} / {worst:.3f} x the bare loop (least / median / "
              f"largest; target <= {RUN_TARGET} in each run: {verdict}); Snakemake's main "
              f"process {min(main_share):.1f}-{max(main_share):.1f} CPU-s")  # fmt: skip
    path_ratio = min(path_runs) / min(bare_runs)
    print(f"score path, {len(sample)} directions, least of {arguments.repeats}: "
          f"{min(path_runs):.2f} CPU-s; bare loop {min(bare_runs):.2f} CPU-s; ratio "
          f"{path_ratio:.2f} (target <= {PATH_TARGET}: "
          f"{'met' if path_ratio <= PATH_TARGET else 'NOT met'})")  # fmt: skip
    print("chrF++ of every sentence identical to sentence_score's")


if __name__ == "__main__":
    main()
