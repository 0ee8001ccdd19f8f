"""What users see of a run, through real Snakemake runs: the run-wide progress view beside a
running workflow, a translator that hangs, and translators that return what cannot be used."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

from snakemake_interface_logger_plugins.common import LogEvent

from bouquet_eval.command.console import PROGRESS_SECONDS
from bouquet_eval.command.tracker import PLANNED, PlannedJob, RunTracker
from bouquet_eval.planning.plan import Sources, load_plan
from bouquet_eval.planning.progress import run_progress

from .conftest import REPOSITORY, SAMPLE, SNAKEFILE, Workflow, patience
from .workflow_configs import bounds_config, recorded, recording_model

ENGLISH_OUT = [
    "eng_Latn-arb_Arab",
    "eng_Latn-cmn_Hans",
    "eng_Latn-deu_Latn",
    "eng_Latn-fra_Latn",
    "eng_Latn-hin_Deva",
    "eng_Latn-por_Latn_braz1246",
    "eng_Latn-rus_Cyrl",
    "eng_Latn-spa_Latn",
]


def progress(workflow: Workflow) -> dict[tuple[str, str], tuple[int, int]]:
    """(model, stage) -> (done, of), from `snakemake progress --nolock`."""
    output = workflow.run("progress", "--nolock", "--quiet").stdout
    table = {}
    for line in output.splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[1] in ("translate", "score"):
            table[fields[0], fields[1]] = (int(fields[2]), int(fields[3]))
    return table


def test_progress_can_be_asked_while_a_run_is_going(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    held = workflow.workdir / "hold"
    held.touch()
    model = recording_model("rec", record, hang_on_target="hin_Deva", hang_while_exists=str(held))
    config = bounds_config(
        dataset, shards=1, models=[model], directions={"src_langs": ["eng_Latn"]}
    )
    workflow.write_config(config)
    run = workflow.start("scores")
    try:
        # The job stops at eng_Latn-hin_Deva, after the four directions before it.
        fourth = workflow.workdir / "runs/rec/.provenance/eng_Latn-fra_Latn.jsonl.json"
        deadline = time.monotonic() + patience(120)
        while not fourth.exists():
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        during = progress(workflow)
        assert run.poll() is None, "the run should still be going"
        held.unlink()
        output, _ = run.communicate(timeout=patience(300))
    finally:
        run.kill()
    assert run.returncode == 0, output
    assert during == {("rec", "translate"): (4, 8), ("rec", "score"): (0, 8)}
    log = (workflow.workdir / "logs" / "rec" / "translate" / "shard0of1.log").read_text()
    assert "1 of 8 directions done, about" in log
    assert "8 of 8 directions done in" in log

    # What the view counts, on the finished run: everything, then less once a translation
    # changes (its scores go with it).
    folder = workflow.workdir / "runs"
    config["output_dir"] = str(folder)

    def counts() -> list[tuple[str, int, int]]:
        plan = load_plan(
            config, SNAKEFILE.parent / "schemas" / "config.schema.yaml", Sources(REPOSITORY)
        )
        return [(row.stage, row.done, row.total) for row in run_progress(plan)]

    assert counts() == [("translate", 8, 8), ("score", 8, 8)]
    translations = folder / "rec" / "eng_Latn-fra_Latn.jsonl"
    translations.write_text(translations.read_text().replace("A", "B"))
    assert counts() == [("translate", 7, 8), ("score", 7, 8)]
    (folder / "rec" / "eng_Latn-deu_Latn.scored.parquet").unlink()
    assert counts() == [("translate", 7, 8), ("score", 6, 8)]
    # A translator setting changed: every translation is to be redone, and so its scores.
    model["translator_kwargs"]["suffix"] = " (changed)"
    assert counts() == [("translate", 0, 8), ("score", 0, 8)]


# What Snakemake's scheduler prints between jobs, whenever it gets to it.
SCHEDULER_NOISE = re.compile(r"Select jobs to execute\.\.\.|Execute \d+ jobs\.\.\.|\[.*\]|\s*")


def last_log_line(workflow: Workflow, model: str) -> str:
    log = workflow.workdir / "logs" / model / "translate" / "shard0of1.log"
    return log.read_text(encoding="utf-8").splitlines()[-1]


def test_a_stream_that_hangs_fails_and_keeps_the_finished_directions(
    workflow: Workflow, dataset: Path
) -> None:
    record = workflow.workdir / "record.txt"
    held = workflow.workdir / "hold"
    held.touch()
    model = recording_model("rec", record, hang_on_target="hin_Deva", hang_while_exists=str(held))
    model["translator"] = "recording:StreamingRecorder"
    config = bounds_config(
        dataset, shards=1, models=[model], directions={"src_langs": ["eng_Latn"]}
    )
    # Short, so that the test does not wait long for the hang to be noticed, but long enough
    # that no direction before it, slowed by other work on the machine, is taken for one.
    stall_timeout = round(patience(3), 1)
    workflow.write_config({**config, "stall_timeout": stall_timeout})
    failed = workflow.run("translations", check=False)
    assert failed.returncode != 0
    message = (
        f"model rec, direction eng_Latn-hin_Deva: the translator made no progress for "
        f"{stall_timeout:g} s (stall_timeout); the directions finished before are kept"
    )
    assert last_log_line(workflow, "rec").endswith(f"job failed: TranslatorStalled: {message}")
    assert message in failed.stderr
    # The stream takes directions two at a time, the second first: eng_Latn-por_Latn_braz1246
    # was done before eng_Latn-hin_Deva hung.
    finished = [line for line in recorded(record) if line != "LOAD"]
    assert sorted(finished) == sorted(ENGLISH_OUT[:4] + ENGLISH_OUT[5:6])
    folder = workflow.workdir / "runs" / "rec"
    assert sorted(p.name for p in folder.glob(".cache/*/*.jsonl")) == sorted(
        f"{name}.jsonl" for name in finished
    )

    # Rerun, the translator no longer hanging: the finished directions are restored, and
    # only the others translated.
    held.unlink()
    record.unlink()
    workflow.run("translations")
    assert sorted(line for line in recorded(record) if line != "LOAD") == sorted(
        set(ENGLISH_OUT) - set(finished)
    )
    assert len(list(folder.glob("*.jsonl"))) == len(ENGLISH_OUT)


def test_unusable_translations_are_named_in_the_last_line(
    workflow: Workflow, dataset: Path
) -> None:
    record = workflow.workdir / "record.txt"
    workflow.write_config(
        bounds_config(
            dataset,
            shards=1,
            directions={"list": ["eng_Latn-deu_Latn"]},
            models=[
                recording_model("none", record, return_none=True),
                recording_model("surrogate", record, lone_surrogate=True),
            ],
        )
    )
    # One job at a time, so that each job's output is followed by Snakemake's report of it.
    failed = workflow.run("translations", "--keep-going", "--cores", "1", check=False)
    assert failed.returncode != 0
    # The console says which jobs failed and where their logs are.
    for model in ("none", "surrogate"):
        assert (
            f"bouquet-eval: job translate_{model}_shard0of1 failed; its log: "
            f"{workflow.workdir}/logs/{model}/translate/shard0of1.log; it ends: " in failed.stderr
        ), failed.stderr
    lines = {model: last_log_line(workflow, model) for model in ("none", "surrogate")}
    prefix = "job failed: TranslationError: model {}, direction eng_Latn-deu_Latn: "
    assert lines["none"].endswith(
        prefix.format("none") + "the translator returned NoneType, not a list of 24 strings"
    )
    assert (
        prefix.format("surrogate") + "output 24 of the translator holds '\\udcff' at "
        in (lines["surrogate"])
    )
    # Each line is its job's last word before Snakemake's own report of the failure (its
    # scheduler may say it selects the next job in between, whenever it gets to it).
    reports = failed.stderr.split("RuleException")[:-1]
    last_words = [
        [line for line in report.splitlines() if not SCHEDULER_NOISE.fullmatch(line)][-1]
        for report in reports
    ]
    assert sorted(last_words) == sorted(lines.values())
    assert not list((workflow.workdir / "runs").rglob("*.jsonl"))


def test_the_plain_snakemake_console_is_a_line_per_stage(
    workflow: Workflow, tmp_path: Path
) -> None:
    """`snakemake` as users type it: the job table once, a line per stage when it moves, and
    where the results are at the end; every job's detail is in Snakemake's log."""
    dataset = tmp_path / "dataset"
    shutil.copytree(SAMPLE, dataset)
    workflow.write_config(
        {
            "dataset": {"path": str(dataset)},
            "limit": 6,
            "models": [{"name": n, "translator": n} for n in ("copy-source", "reference")],
        }
    )
    planned = workflow.run("--dry-run")
    lines = _console(planned.stdout + planned.stderr)
    # The table once (Snakemake's own writes it twice, then every rule's reasons on one line),
    # then a line per rule of what its jobs ask for, shards together.
    assert [line for line in lines if line.startswith("Job stats")] == ["Job stats:"], lines
    rows = [line for line in lines if re.fullmatch(r"\S+ +\d+", line)]
    asked = [line for line in lines if re.match(r" +\S+: \d+ jobs?, threads \d+", line)]
    assert len(asked) == len({re.sub(r"_shard\d+of\d+", "", r.split()[0]) for r in rows}) - 1
    assert len(lines) <= len(rows) + len(asked) + 8 and max(map(len, lines)) <= 100, lines

    started = time.monotonic()
    done = workflow.run()
    elapsed = time.monotonic() - started
    lines = _console(done.stdout + done.stderr)
    # Lines that wrap go on indented: each printed line with its continuations.
    printed: list[list[str]] = []
    for line in lines:
        if line.startswith("    ") and printed:
            printed[-1].append(line)
        else:
            printed.append([line])
    # A progress line as the stages move (five stages), and in between at most one every
    # PROGRESS_SECONDS (or what the run does when they do not move), so that a slower run
    # prints more of them, each at most two lines wide; besides them, what was selected, the
    # job table, Snakemake's log and where the results are.
    progress = [line for line in printed if line[0].startswith("bouquet-eval: translate ")]
    assert len(progress) <= 5 + elapsed / PROGRESS_SECONDS + 1, lines
    assert max(map(len, progress)) <= 2, lines
    assert max(len(part) for line in progress for part in line) <= 100, progress
    assert len(printed) - len(progress) == 4, lines
    (table,) = [line for line in lines if "jobs to run:" in line]
    assert re.fullmatch(
        r"bouquet-eval: \d+ jobs to run: translate (\d+), score (\d+), aggregate 2, "
        r"heatmaps 2, leaderboard 1",
        table,
    ), table
    assert lines[-2].startswith("Snakemake's full log: ")
    results = workflow.workdir / "runs"
    assert lines[-1].startswith(f"bouquet-eval: results in {results}/ ")
    assert re.search(
        r"bouquet-eval: translate 40/40 directions, score 40/40 directions, aggregate 2/2,"
        r"\s+heatmaps 2/2,\s+leaderboard 1/1",
        "\n".join(lines),
    ), lines
    full = Path(lines[-2].split(": ", 1)[1]).read_text(encoding="utf-8")
    assert "rule translate_" in full and "output: runs/reference/" in full


def _console(output: str) -> list[str]:
    """The console's lines, without Snakemake's note of the profile it applies."""
    return [line for line in output.splitlines() if "workflow specific profile" not in line]


def test_the_time_left_leaves_out_the_start_and_holds_from_a_tenth_of_a_stage(
    tmp_path: Path,
) -> None:
    """A stage of 200 directions that starts after a minute (planning, a model's load), then
    writes a direction a second: by a tenth of it, the time left is within a tenth of the
    truth (counting the start in, the pace since the run began says 12 min: 4x too long)."""
    now = [0.0]
    folder = tmp_path / "runs" / "m"
    folder.mkdir(parents=True)
    names = [f"aaa_Latn-{chr(97 + i // 26 % 26)}{chr(97 + i % 26)}x_Latn" for i in range(200)]
    outputs = tuple(str(folder / f"{name}.jsonl") for name in names)
    tracker = RunTracker({1: PlannedJob("translate_m_shard0of1", outputs, None)}, lambda: now[0])
    tracker.started(1)
    assert tracker.line() == "translate 0/200 directions"
    now[0] = 60.0
    for written, path in enumerate(outputs[:20], start=1):
        Path(path).write_text("{}\n")
        now[0] = 60.0 + written
        tracker.poll()
    left = re.fullmatch(r"translate 20/200 directions \(about (\d+) min left\)", tracker.line())
    assert left and abs(int(left.group(1)) * 60 - 180) <= 18, tracker.line()
    # Its job has ended: its benchmark record is written, Snakemake records its outputs.
    assert tracker.activity().startswith("running: translate_m_shard0of1 (")
    tracker.jobs[1] = PlannedJob("translate_m_shard0of1", outputs, str(tmp_path / "bench.tsv"))
    (tmp_path / "bench.tsv").write_text("s\n1\n")
    assert tracker.activity() == (
        "Snakemake records the 200 outputs of translate_m_shard0of1, whose job has ended"
    )
    tracker.finished(1)
    assert tracker.line() == "translate 200/200 directions"
    assert tracker.activity() == "Snakemake ends the run"


def test_a_direction_scored_by_several_jobs_counts_in_part(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    metric = folder / "by-metric" / "chrf"
    metric.mkdir(parents=True)
    scores = tuple(str(metric / f"eng_Latn-{c}_Latn.parquet") for c in ("fra", "deu"))
    scored = tuple(str(folder / f"eng_Latn-{c}_Latn.scored.parquet") for c in ("fra", "deu"))
    tracker = RunTracker(
        {
            1: PlannedJob("score_workflow_cpu_m_shard0of1", scores, None),
            2: PlannedJob("score_m_shard0of1", scored, None),
            3: PlannedJob("aggregate", (str(folder / "scores.csv"), str(folder / "x.csv")), None),
            4: PlannedJob("all", (), None),
        }
    )
    assert tracker.line() == "score 0/2 directions, aggregate 0/1"
    tracker.started(1)
    for path in scores:
        Path(path).write_text("")
    tracker.poll()
    assert tracker.counts() == (1, 0) and tracker.line().startswith("score 1/2 directions")
    tracker.finished(2)
    assert tracker.complete() == {"score"}


def test_a_silent_run_is_told_at_least_every_heartbeat(monkeypatch, tmp_path: Path) -> None:
    """The console's own clock: with no event from Snakemake, it still says what the run
    does (a job running), at the heartbeat."""
    import io
    import logging
    from types import SimpleNamespace

    from bouquet_eval.command import console

    monkeypatch.setattr(console, "HEARTBEAT_SECONDS", 0.5)
    monkeypatch.delenv("BOUQUET_EVAL_COMMAND", raising=False)
    stream = io.StringIO()
    monkeypatch.setattr(console.sys, "stderr", stream)
    settings: Any = SimpleNamespace(stdout=False, dryrun=False, quiet=None)
    handler = console.ConsoleHandler(common_settings=settings, settings=None)
    try:
        job = PlannedJob("translate_m_shard0of1", (str(tmp_path / "a-b.jsonl"),), None)
        planned = logging.LogRecord("snakemake", logging.INFO, "", 0, "planned", None, None)
        setattr(planned, PLANNED, {7: job})
        handler.emit(planned)
        started = logging.LogRecord("snakemake", logging.INFO, "", 0, "job", None, None)
        started.event, started.jobid, started.rule_name = LogEvent.JOB_INFO, 7, job.rule
        handler.emit(started)
        time.sleep(2.5)
    finally:
        handler.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2, lines
    assert all(
        re.fullmatch(r"bouquet-eval: translate 0/1; running: translate_m_shard0of1 \(\d s\)", x)
        for x in lines
    ), lines
