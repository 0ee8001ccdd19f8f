"""A new user at BOUQuET's shape: six models of their own translator (a package in the folder
they work in, on no import path) over 1062 directions, through `bouquet-eval run`, `bouquet-eval
leaderboard` from that folder and from another, plain `snakemake` and the report command it
prints, and `bouquet-eval metaeval`; COMET asked for without its environment, and with it.
Every console is timed line by line.

The runs are shared by the tests of this file (in its order); a few sentences per direction keep
them short.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from .conftest import REPOSITORY, Workflow, built_in, environment_python
from .synthetic import bouquet_shaped_directions

# Twenty minutes and more on two busy cores: not in `make test`, run by `make scene`.
pytestmark = pytest.mark.scene

SENTENCES = 2
MODELS = {  # name: (share of words left out, which words)
    "steady": (0.15, "a"),
    # steady's translations under another name: one cluster. (The same share of other words
    # is not as good: over 2,124 sentences a few tenths of chrF++ are significant.)
    "twin": (0.15, "a"),
    "looser": (0.3, "a"),
    "rough": (0.45, "a"),
    "sparse": (0.6, "a"),
    "scant": (0.75, "a"),
}
SILENCE = 30.0
"""The longest a console may say nothing (the issue's bound)."""

TRANSLATOR = textwrap.dedent(
    '''
    """A translator of one's own: each source sentence with a share of its words left out."""

    import os
    import zlib
    from pathlib import Path

    # Which processes import it: a line each.
    with open(Path(__file__).resolve().parents[1] / "imported.txt", "a") as record:
        record.write(f"{os.getpid()}\\n")


    class Degrade:
        def __init__(self, drop, salt="a"):
            self.drop, self.salt = drop, salt

        def translate(self, prompts):
            return [self.degrade(prompt.rsplit("\\n", 1)[-1]) for prompt in prompts]

        def degrade(self, text):
            kept = [
                word for word in text.split()
                if zlib.crc32(f"{self.salt}{word}".encode()) % 1000 >= self.drop * 1000
            ]
            return " ".join(kept)
    '''
)


@dataclass
class Console:
    """What a command printed, each line with the seconds since it started, and its end."""

    returncode: int
    lines: list[tuple[float, str]]
    ended: float

    @property
    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def longest_silence(self) -> float:
        times = [0.0, *(at for at, _ in self.lines), self.ended]
        return max(later - earlier for earlier, later in itertools.pairwise(times))


def timed(arguments: list[str], cwd: Path, env: dict[str, str] | None = None) -> Console:
    started = time.monotonic()
    process = subprocess.Popen(
        arguments, cwd=cwd, env=env or Workflow.environment(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    lines = [(time.monotonic() - started, line.rstrip("\n")) for line in process.stdout]
    returncode = process.wait()
    return Console(returncode, lines, time.monotonic() - started)


def bouquet_eval(*arguments: str, cwd: Path, env: dict[str, str] | None = None) -> Console:
    return timed([sys.executable, "-m", "bouquet_eval", *arguments], cwd, env)


def write_dataset(folder: Path) -> None:
    """1062 directions of BOUQuET's shape, each with sentences of its own words."""
    folder.mkdir(parents=True)
    words = [f"w{i}" for i in range(400)]
    for index, direction in enumerate(bouquet_shaped_directions()):
        texts = [
            " ".join(words[(index * 7 + sentence * 13 + k * k) % len(words)] for k in range(9))
            for sentence in range(SENTENCES)
        ]
        columns = {
            "src_lang": [direction.src_lang] * SENTENCES,
            "tgt_lang": [direction.tgt_lang] * SENTENCES,
            "src_text": texts,
            "tgt_text": texts,
            "uniq_id": [f"s{i}" for i in range(SENTENCES)],
        }
        pq.write_table(pa.table(columns), folder / f"{direction}.parquet")


@dataclass
class Scene:
    work: Path
    """The user's folder: mypkg/, data/, runs/."""
    elsewhere: Path
    """Another folder, where mypkg cannot be imported."""
    runs: dict[str, Console]

    @property
    def imported(self) -> Path:
        return self.work / "imported.txt"

    def imports(self) -> int:
        return len(self.imported.read_text().split()) if self.imported.exists() else 0


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    root = tmp_path_factory.mktemp("real-shape")
    work, elsewhere = root / "work", root / "elsewhere"
    (work / "mypkg").mkdir(parents=True)
    elsewhere.mkdir()
    (work / "mypkg" / "__init__.py").write_text("")
    (work / "mypkg" / "degrade.py").write_text(TRANSLATOR)
    write_dataset(work / "data")
    runs: dict[str, Console] = {}

    def run(name: str) -> None:
        drop, salt = MODELS[name]
        runs[name] = bouquet_eval(
            "run", "--translator", "mypkg.degrade:Degrade", "--translator-kwargs",
            json.dumps({"drop": drop, "salt": salt}), "--all", "--metrics", "chrf",
            "--dataset-path", "data", "--output-dir", f"runs/{name}", "--cores", "1",
            cwd=work,
        )  # fmt: skip

    names = list(MODELS)
    for pair in (names[:2], names[2:4], names[4:]):  # two at a time, on two cores
        threads = [threading.Thread(target=run, args=(name,)) for name in pair]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for name, console in runs.items():
        assert console.returncode == 0, f"{name}:\n{console.text}"
    return Scene(work, elsewhere, runs)


def test_the_runs_of_ones_own_translator_and_their_consoles(scene: Scene) -> None:
    for name, console in scene.runs.items():
        assert [line for _, line in console.lines if " selected (" in line] == [
            "bouquet-eval: 1062 directions, 1 model selected (2,124 sentences per model)"
        ]
        assert console.longest_silence() <= SILENCE, console.lines
        # What the command saved: where its translator is, for runs started elsewhere.
        saved = yaml.safe_load((scene.work / "runs" / name / "bouquet-eval.yaml").read_text())
        assert saved["python_path"] == [str(scene.work)]
        assert_estimates_hold(console)
    # The command the saved configuration gives to rerun it, pasted elsewhere.
    header = (scene.work / "runs" / name / "bouquet-eval.yaml").read_text().splitlines()[1]
    again = pasted(header.removeprefix("#").strip(), scene.elsewhere)
    assert "Nothing to be done" in again.stdout + again.stderr  # Snakemake's log: stderr


def assert_estimates_hold(console: Console) -> None:
    """Every estimate of a stage's time left, once a tenth of the stage is done, is within 3x
    of the time the stage then took (and 30 s): what comes before a stage's first direction
    (planning, starting a job) is not in its pace."""
    done_at: dict[str, float] = {}
    estimates = []
    for at, line in console.lines:
        for stage, done, total, left in re.findall(
            r"(\w+) (\d+)/(\d+) directions(?: \(about ([^)]+) left\))?", line
        ):
            if done == total:
                done_at.setdefault(stage, at)
            elif left and int(done) >= int(total) / 10:
                estimates.append((stage, at, seconds(left)))
    assert estimates, console.lines
    for stage, at, left in estimates:
        taken = done_at[stage] - at
        assert left <= 3 * taken + SILENCE and taken <= 3 * left + SILENCE, (stage, at, left)


def seconds(text: str) -> float:
    """`duration`'s text back in seconds."""
    hours = re.search(r"(\d+) h", text)
    minutes = re.search(r"(\d+) min", text)
    plain = re.fullmatch(r"(\d+) s", text)
    if plain:
        return float(plain.group(1))
    return 3600.0 * int(hours.group(1) if hours else 0) + 60.0 * int(
        minutes.group(1) if minutes else 0
    )


def pasted(command: str, cwd: Path, *more: str) -> subprocess.CompletedProcess:
    """A printed `snakemake ...` command as a shell runs it, in `cwd`, with its own import
    path only (the translator's folder is on none)."""
    arguments = shlex.split(command)
    assert arguments[0] == "snakemake", command
    result = subprocess.run(
        [sys.executable, "-m", *arguments, *more], cwd=cwd, env=Workflow.environment(),
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def test_the_leaderboard_from_the_working_folder_imports_no_translator(scene: Scene) -> None:
    before = scene.imports()
    console = bouquet_eval("leaderboard", "runs", "--cores", "2", cwd=scene.work)
    assert console.returncode == 0, console.text
    assert scene.imports() == before  # nothing translated: mypkg imported nowhere
    assert console.longest_silence() <= SILENCE, console.lines
    runs = scene.work / "runs"
    with (runs / "leaderboard.csv").open(newline="") as written:
        board = list(csv.DictReader(written))
    assert [row["model"] for row in board[:2]] in (["steady", "twin"], ["twin", "steady"])
    clusters = [row["cluster"] for row in board]
    assert all(re.fullmatch(r"\d+", cluster) for cluster in clusters), clusters
    assert clusters[:2] == ["1", "1"] and clusters[-1] != "1"
    assert pd.read_csv(runs / "leaderboard.csv")["cluster"].dtype == "int64"
    table = (runs / "leaderboard.md").read_text()
    assert re.search(r"^\| 1 \| (steady|twin) \| 1 \| 1062 \| 2124 \|", table, re.M), table
    assert f"report: {runs / 'report.html'}" in console.text


def test_leaderboard_from_elsewhere_imports_the_translator_where_it_must(scene: Scene) -> None:
    """A direction of one model to redo: its translator is imported (from where the runs say
    it is) for its translate job alone."""
    model = scene.work / "runs" / "looser"
    removed = redo(model, "eng_Latn-aak_Latn")
    before = scene.imports()
    console = bouquet_eval("leaderboard", str(scene.work / "runs"), "--cores", "2",
                           cwd=scene.elsewhere)  # fmt: skip
    assert console.returncode == 0, console.text
    assert console.longest_silence() <= SILENCE, console.lines
    assert all(path.is_file() for path in removed)
    assert scene.imports() > before


def redo(model: Path, direction: str) -> list[Path]:
    """Remove a direction's translations and scores, with their cached copies."""
    removed = [model / f"{direction}.jsonl", model / f"{direction}.scored.parquet"]
    removed += list(model.glob(f"by-metric/*/{direction}.parquet"))
    for path in [*removed, *model.glob(f".cache/**/{direction}*")]:
        path.unlink()
    return removed


def test_plain_snakemake_ends_with_a_report_command_that_works_pasted(scene: Scene) -> None:
    runs = scene.work / "runs"
    redo(runs / "rough", "eng_Latn-aak_Latn")
    config = runs / "bouquet-eval-leaderboard.yaml"
    command = [sys.executable, "-m", "snakemake", "-s", str(REPOSITORY / "workflow" / "Snakefile"),
               "-d", str(runs), "--cores", "2", "--configfile", str(config)]  # fmt: skip
    console = timed(command, scene.elsewhere)
    assert console.returncode == 0, console.text
    assert console.longest_silence() <= SILENCE, console.lines
    last = console.lines[-1][1]
    found = re.fullmatch(r"bouquet-eval: results in (\S+)/ \(.*\); the report: (snakemake .+)",
                         last)  # fmt: skip
    assert found and found.group(1) == str(runs), last
    report = runs / "report.html"
    report.unlink()
    pasted(found.group(2), scene.elsewhere)
    assert report.stat().st_size > 1_000_000


def test_metaeval_on_the_command_line_says_what_it_does(scene: Scene) -> None:
    directions = [d.name for d in bouquet_shaped_directions()][:60]
    rows = [
        {"src_lang": name.split("-")[0], "tgt_lang": name.split("-")[1],
         "src_text": f"source {segment}", "tgt_text": f"the reference {segment} of {name}",
         "mt_text": f"the reference {segment}" + " of" * quality, "system": f"system-{quality}",
         "score": 5 - quality + segment % 2, "uniq_id": f"s{segment}"}
        for name in directions for segment in range(4) for quality in range(3)
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(scene.work / "judged.csv", index=False)
    console = bouquet_eval(
        "metaeval", "--judgements", "judged.csv", "--metrics", "chrf", "--dataset-path", "data",
        "--output-dir", "judged/people", "--cores", "2", cwd=scene.work,
    )  # fmt: skip
    assert console.returncode == 0, console.text
    assert console.longest_silence() <= SILENCE, console.lines
    assert re.search(r"^bouquet-eval: .*score \d+/180 directions", console.text, re.M)
    correlations = pd.read_csv(scene.work / "judged" / "metaeval" / "correlations.csv")
    assert set(correlations["metric"]) == {"chrfpp"}


def test_comet_without_its_environment_stops_before_translating(scene: Scene) -> None:
    console = bouquet_eval(
        "run", "--translator", "mypkg.degrade:Degrade", "--translator-kwargs", '{"drop": 0}',
        "--all", "--metrics", "chrf,comet", "--dataset-path", "data", "--output-dir",
        "other/seventh", cwd=scene.work,
    )  # fmt: skip
    assert console.returncode == 1
    (line,) = [line for _, line in console.lines if "software environment" in line]
    assert re.fullmatch(
        r"bouquet-eval: metric comet scores in the software environment 'comet' "
        r"\(envs/comet\.yaml\), and this Python \(\S+\) has no module comet: give that "
        r"environment's Python with --environment comet=PYTHON \(docs/metrics\.md#score-jobs\), "
        r"or run with --sdm conda\. No job was started\.",
        line,
    ), line
    assert not list((scene.work / "other" / "seventh").glob("*.jsonl"))


def test_comet_with_its_environment_scores_every_direction(scene: Scene, tmp_path: Path) -> None:
    """The same command with COMET's environment given (a tiny checkpoint, on the CPU): every
    direction is scored by it too, and the console is never silent for long."""
    python = environment_python("COMET", "comet")
    checkpoint = built_in(python, "tests.comet_checkpoints", tmp_path)["comet"]
    console = bouquet_eval(
        "run", "--translator", "mypkg.degrade:Degrade", "--translator-kwargs", '{"drop": 0.15}',
        "--all", "--metrics", "chrf,comet", "--comet-model", checkpoint, "--comet-device", "cpu",
        "--environment", f"comet={python}", "--dataset-path", "data", "--output-dir",
        "other/with-comet", "--cores", "2", cwd=scene.work,
        env=Workflow.environment({"HF_HUB_OFFLINE": "1"}),
    )  # fmt: skip
    assert console.returncode == 0, console.text
    assert console.longest_silence() <= SILENCE, console.lines
    scores = pd.read_csv(scene.work / "other" / "with-comet" / "scores.csv")
    assert len(scores) == 1062 and scores["comet"].notna().all()
