"""The workflow on a real one-node Slurm cluster, through profiles/slurm, as users run it.

The cluster is installed (Debian's packages) and started once for this module, and its
daemons are stopped at the end, after checking that no process of it or of its jobs outlived
the tests. Machines that cannot run it (no root, no apt) skip these tests with the reason.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from .conftest import REPOSITORY, SAMPLE, Workflow
from .debian import install
from .slurm.cluster import (
    GPU_TYPE,
    KILL_WAIT,
    NODE_FEATURE,
    SLURM_PACKAGES,
    LocalSlurm,
    unavailable_reason,
    wait_for,
)
from .tiny_llama import ENGINE_SETTINGS, VLLM_TEST_ENV, build_tiny_llama
from .workflow_configs import SAMPLE_DIRECTIONS, SMALL_JOBS, recording_model

PROFILES = ("--profile", str(REPOSITORY / "profiles" / "slurm"),
            "--profile", str(REPOSITORY / "tests" / "slurm" / "profile"))  # fmt: skip
# The vLLM environment the Makefile builds; translate jobs reach it through a module.
VLLM_VENV = REPOSITORY / ".venv-vllm"
MODULES_INIT = Path("/usr/share/modules/init/bash")
MODULES_PACKAGES = {"modulecmd": "environment-modules"}


@pytest.fixture(scope="module")
def slurm():
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Slurm cluster on this machine: {reason}")
    # Environment Modules too (for the vLLM test), in the same apt-get run.
    install({**SLURM_PACKAGES, **MODULES_PACKAGES})
    # Not under pytest's private temporary folder: munged runs as its own user.
    root = Path(tempfile.mkdtemp(prefix="bouquet-eval-slurm-"))
    root.chmod(0o755)
    cluster = LocalSlurm(root)
    try:
        cluster.start()
        yield cluster
    finally:
        leftovers = cluster.stop()
    assert not cluster.running_daemons(), "Slurm daemons survived the tests"
    assert not leftovers, f"processes of the cluster or its jobs outlived the tests: {leftovers}"
    shutil.rmtree(root)


def completed_jobs(cluster: LocalSlurm) -> dict[str, str]:
    """Slurm's own record of finished jobs: job id -> state."""
    if not cluster.jobcomp.exists():
        return {}
    return dict(re.findall(r"JobId=(\d+) .*?JobState=(\S+)", cluster.jobcomp.read_text()))


def sbatch_calls(log: str) -> dict[str, str]:
    """Rule -> the sbatch command line it was submitted with (from a --verbose run's log)."""
    calls = {}
    for call in re.findall(r"sbatch call: (sbatch .*)", log):
        comment_option = re.search(r"--comment (\S+)", call)
        assert comment_option, call
        comment = comment_option.group(1).strip("'")
        calls[comment.removeprefix("rule_").split("_wildcards_")[0]] = call
    return calls


def full_log(workdir: Path, console: str) -> str:
    """Snakemake's full log of a run, which its console names (the console shows no job)."""
    named = re.search(r"Snakemake's full log: (\S+)", console)
    assert named, console
    return (workdir / named.group(1)).read_text(encoding="utf-8")


def asked_resources(console: str) -> dict[str, dict[str, str]]:
    """Rule (shards together) -> what its jobs ask for, from a dry run's console lines."""
    text = re.sub(r"\n {8}", " ", console)  # lines the console wrapped
    return {
        rule: dict(item.split("=", 1) for item in asked.split(", ")) if asked else {}
        for rule, asked in re.findall(
            r"^ +(\S+): \d+ jobs?, threads \d+(?:, (.*))?$", text, re.MULTILINE
        )
    }


def sample_config(dataset: Path, record: Path, **model_settings) -> dict:
    return {
        "dataset": {"path": str(dataset)},
        "shards": 2,
        "metrics": ["chrf", "recording:LoadCountingMetric"],
        "resources": SMALL_JOBS,
        "models": [
            {**recording_model("rec", record, record_devices=True, **model_settings), "gpus": 1}
        ],
    }


def test_workflow_through_sbatch(
    slurm: LocalSlurm, workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    record = workflow.workdir / "record.txt"
    metric_record = workflow.workdir / "metric.txt"
    config = sample_config(dataset, record)
    # Slurm settings per job family and per model, which the cluster must honour.
    config["resources"] = {
        "translate": {**SMALL_JOBS["translate"], "gpu_model": GPU_TYPE, "qos": "normal"},
        "score": {**SMALL_JOBS["score"], "slurm_extra": "--nice=5"},
        "aggregate": {"mem_mb": 300, "runtime": 5, "cpus": 1},
    }
    config["models"][0]["resources"] = {"constraint": NODE_FEATURE, "mem_mb": 600}
    workflow.write_config(config)
    environment = {**slurm.environment, "RECORDING_METRIC_FILE": str(metric_record)}
    before = set(completed_jobs(slurm))
    log = full_log(workflow.workdir, workflow.run(*PROFILES, "--verbose", env=environment).stderr)

    jobs = {job: state for job, state in completed_jobs(slurm).items() if job not in before}
    # 2 translate + 2 score shards + 1 aggregate
    assert len(jobs) == 5 and set(jobs.values()) == {"COMPLETED"}
    calls = sbatch_calls(log)
    translate_calls = [call for rule, call in calls.items() if rule.startswith("translate")]
    score_calls = [call for rule, call in calls.items() if rule.startswith("score")]
    assert len(translate_calls) == 2 and len(score_calls) == 2 and "aggregate" in calls
    for call in translate_calls:
        assert f"--gpus={GPU_TYPE}:1" in call and f"-C {NODE_FEATURE}" in call
        assert "--qos=normal" in call and "--mem 600" in call and "--nice" not in call
    for call in score_calls:
        assert "--nice=5" in call and "--gpus" not in call and "--mem 500" in call
    assert "--mem 300" in calls["aggregate"] and "--gpus" not in calls["aggregate"]
    # Translate jobs asked for a GPU and Slurm gave each one.
    uses = [line.split() for line in Path(f"{record}.devices").read_text().splitlines()]
    assert len(uses) == len(SAMPLE_DIRECTIONS)
    assert {job for *_, job in uses} <= set(jobs) and len({job for *_, job in uses}) == 2
    assert {device for _, device, *_ in uses} <= {"0", "1"}
    # Score jobs (chrF++ and a CPU metric) asked for none.
    metric_loads = [line.split() for line in metric_record.read_text().splitlines()]
    assert len(metric_loads) == 2
    assert {devices for _, _, devices, _ in metric_loads} == {"none"}
    assert {job for *_, job in metric_loads} <= set(jobs)

    # The same configuration run locally gives the same outputs.
    local = Workflow(tmp_path / "local")
    local.workdir.mkdir()
    local.write_config(sample_config(dataset, tmp_path / "local-record.txt"))
    local.run(env={"RECORDING_METRIC_FILE": str(tmp_path / "local-metric.txt")})
    for direction in SAMPLE_DIRECTIONS:
        ours = workflow.workdir / "runs" / "rec" / f"{direction}.jsonl"
        theirs = local.workdir / "runs" / "rec" / f"{direction}.jsonl"
        assert ours.read_bytes() == theirs.read_bytes()
        pd.testing.assert_frame_equal(
            pd.read_parquet(ours.with_suffix(".scored.parquet")),
            pd.read_parquet(theirs.with_suffix(".scored.parquet")),
        )
    pd.testing.assert_frame_equal(
        pd.read_csv(workflow.workdir / "runs" / "rec" / "scores.csv"),
        pd.read_csv(local.workdir / "runs" / "rec" / "scores.csv"),
    )


def test_slurm_settings_per_job_family_and_model_in_the_plan(workflow: Workflow) -> None:
    """`snakemake -n` shows what each job will ask Slurm for (no cluster needed)."""
    workflow.write_config(
        {
            "dataset": {"path": str(SAMPLE)},
            "directions": {"list": ["eng_Latn-fra_Latn"]},
            "shards": 1,
            "resources": {
                "translate": {"slurm_partition": "gpu", "gpu_model": "a100", "qos": "short"},
                "score": {
                    "slurm_partition": "cpu",
                    "constraint": "intel|amd",
                    "envmodules": ["metrics-env"],
                },
                # One family of metrics' jobs, over `score`.
                "score_workflow_cpu": {"mem_mb": 2000},
                "aggregate": {"slurm_account": "lab", "slurm_extra": "--mail-type=FAIL"},
            },
            "models": [
                {"name": "plain", "translator": "copy-source", "gpus": 1},
                {
                    "name": "big",
                    "translator": "copy-source",
                    "gpus": 4,
                    "resources": {"gres": "gpu:h100", "mem_mb": 64000, "slurm_account": "big"},
                },
            ],
        }
    )
    # The console names what each rule's jobs ask for (shards together).
    run = workflow.run("--dry-run", "--printshellcmds", "--quiet", "progress")
    # From a scratch directory, with -s and -d, the workflow's own defaults still apply.
    profile = REPOSITORY / "workflow" / "profiles" / "default"
    assert f"workflow specific profile {profile} for setting default" in run.stderr
    warning = "load environment modules (metrics-env), which happens only with --sdm"
    assert warning in run.stdout + run.stderr
    resources = asked_resources(run.stdout + run.stderr)
    plain, big = resources["translate_plain"], resources["translate_big"]
    assert (plain["slurm_partition"], plain["qos"], plain["gpu"]) == ("gpu", "short", "1")
    assert plain["gpu_model"] == "a100" and plain["mem_mb"] == "16000"
    # The model's own settings win over its family's, key by key; its GPU type replaces
    # the family's (Slurm takes --gres or --gpus, not both).
    assert (big["slurm_partition"], big["slurm_account"], big["mem_mb"]) == ("gpu", "big", "64000")
    assert big["gres"] == "gpu:h100:4" and big["gpu"] == "0" and "gpu_model" not in big
    # chrF++'s score jobs (which write the scored files too: chrF++ is one family).
    score = resources["score_workflow_cpu_plain"]
    assert (score["slurm_partition"], score["constraint"], score["gpu"]) == (
        "cpu",
        "intel|amd",
        "0",
    )
    assert score["mem_mb"] == "2000"
    aggregate = resources["aggregate"]
    assert (aggregate["slurm_account"], aggregate["slurm_extra"]) == ("lab", "--mail-type=FAIL")
    assert aggregate["mem_mb"] == "8000" and "slurm_partition" not in aggregate


@pytest.fixture(scope="module")
def vllm_module(slurm: LocalSlurm, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A module that puts .venv-vllm first on PATH (envs/modulefiles/ with its path filled in),
    and what the environment of Snakemake needs to load it in jobs, as the README says: the
    module's folder on MODULEPATH (`module use`), and BASH_ENV, which defines `module` in the
    non-interactive shells that jobs run in (Lmod sets it itself). The `slurm` fixture
    installed Environment Modules."""
    if not (VLLM_VENV / "bin" / "python").exists():
        pytest.skip(f"needs vLLM's own environment {VLLM_VENV} (make install-all)")
    folder = tmp_path_factory.mktemp("modulefiles")
    template = (REPOSITORY / "envs" / "modulefiles" / "bouquet-eval-vllm").read_text()
    module = re.sub(r"(?m)^set venv .*$", f"set venv {VLLM_VENV}", template)
    (folder / "bouquet-eval-vllm").write_text(module)
    return {"MODULEPATH": str(folder), "BASH_ENV": str(MODULES_INIT)}


def vllm_translations(workflow: Workflow) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted((workflow.workdir / "runs" / "tiny").glob("*.jsonl"))
    }


def test_vllm_jobs_on_slurm_in_their_own_environment(
    slurm: LocalSlurm, vllm_module: dict[str, str], workflow: Workflow, tmp_path: Path
) -> None:
    """Snakemake and the Slurm plugin in .venv; translate jobs load vLLM's environment."""
    import importlib.util

    assert importlib.util.find_spec("vllm") is None, "this test needs a Snakemake without vLLM"
    model = build_tiny_llama(tmp_path / "tiny-llama")
    directions = ["eng_Latn-fra_Latn", "fra_Latn-eng_Latn"]
    config = {
        "dataset": {"path": str(SAMPLE)},
        "directions": {"list": directions},
        "limit": 3,
        "shards": 1,
        "resources": {
            **SMALL_JOBS,
            "translate": {
                "mem_mb": 2000,
                "runtime": 10,
                "cpus": 1,
                "envmodules": ["bouquet-eval-vllm"],
            },
        },
        "models": [
            {
                "name": "tiny",
                "translator": "vllm",
                "model": str(model),
                "max_tokens": 8,
                **ENGINE_SETTINGS,
            }
        ],
    }
    workflow.write_config(config)
    environment = {
        **vllm_module,
        **VLLM_TEST_ENV,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        **slurm.environment,
    }
    before = set(completed_jobs(slurm))
    workflow.run(
        "translations",
        *PROFILES,
        "--sdm",
        "env-modules",
        "--slurm-keep-successful-logs",
        env=environment,
    )
    jobs = {job: state for job, state in completed_jobs(slurm).items() if job not in before}
    assert list(jobs.values()) == ["COMPLETED"]  # one translate job, on Slurm, with a GPU
    (slurm_log,) = (workflow.workdir / ".snakemake" / "slurm_logs").glob("rule_translate_*/*")
    job_log = slurm_log.read_text()
    assert "Activating environment modules: bouquet-eval-vllm" in job_log
    assert "command not found" not in job_log
    on_slurm = vllm_translations(workflow)
    assert len(on_slurm) == len(directions)

    local = Workflow(tmp_path / "local")
    local.workdir.mkdir()
    local.write_config(config)
    local.run("translations", "--sdm", "env-modules", env=environment)
    assert vllm_translations(local) == on_slurm


def test_cancelled_job_resumes_where_it_stopped(
    slurm: LocalSlurm, workflow: Workflow, dataset: Path
) -> None:
    record = workflow.workdir / "record.txt"
    folder = workflow.workdir / "runs" / "rec"
    config = sample_config(dataset, record, direction_seconds=0.3)
    # GPUs asked for as --gres (sites without --gpus): Slurm still gives each job its own.
    config["models"][0]["resources"] = {"gres": f"gpu:{GPU_TYPE}"}
    workflow.write_config(config)
    # Snakemake's report of each job, the cancellation among them, is in its log once --quiet
    # no longer names `rules` (the profile's quiet).
    run = subprocess.Popen(
        workflow.command("translations", "--quiet", "progress", *PROFILES),
        env=workflow.environment(slurm.environment),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def finished() -> set[str]:
        """Directions whose translation a job completed (its copy under .cache/ is kept)."""
        return {path.stem for path in folder.glob(".cache/*/*.jsonl")}

    def reported_cancelled() -> int:
        logs = workflow.workdir.glob(".snakemake/log/*.snakemake.log")
        return sum(log.read_text().count("SLURM status is: 'CANCELLED'") for log in logs)

    try:
        wait_for(lambda: len(finished()) >= 2 or run.poll() is not None, 180)
        cancelled = [job for job, rule in running_jobs(slurm) if rule.startswith("translate")]
        assert cancelled, "no translate job was running"
        slurm.client(["scancel", *cancelled]).check_returncode()
        # Snakemake sees the jobs fail at its next status check; then, as a user would, stop
        # it rather than wait for the one after (the Slurm plugin's interval grows to 30 s).
        wait_for(lambda: reported_cancelled() == len(cancelled) or run.poll() is not None, 180)
        assert reported_cancelled() == len(cancelled)
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        run.wait(timeout=60)
    # Cancelling kills every process of the jobs: their step daemons, Snakemake, the script.
    wait_for(lambda: not slurm.job_processes(), KILL_WAIT + 15)
    assert not slurm.job_processes()
    kept = finished()
    assert 0 < len(kept) < len(SAMPLE_DIRECTIONS)

    record.unlink()
    workflow.run("translations", *PROFILES, env=slurm.environment)
    recomputed = [line for line in record.read_text().splitlines() if line != "LOAD"]
    assert sorted(recomputed) == sorted({d.name for d in SAMPLE_DIRECTIONS} - kept)
    uses = [line.split() for line in Path(f"{record}.devices").read_text().splitlines()]
    assert {device for _, device, *_ in uses} <= {"0", "1"}
    assert {path.stem for path in folder.glob("*.jsonl")} == {d.name for d in SAMPLE_DIRECTIONS}


def running_jobs(slurm: LocalSlurm) -> list[tuple[str, str]]:
    """(job id, rule) of the running jobs (the rule from the comment Snakemake gives them)."""
    listing = slurm.client(["squeue", "-h", "-t", "RUNNING", "-o", "%i %k"]).stdout
    return [
        (job, comment.removeprefix("rule_"))
        for job, comment in (line.split() for line in listing.splitlines())
    ]


def test_local_jobs_in_an_allocation_get_distinct_gpus(
    slurm: LocalSlurm, workflow: Workflow, dataset: Path
) -> None:
    """Snakemake run by hand inside `salloc --gpus=2` shares the allocation's GPUs out."""
    record = workflow.workdir / "record.txt"
    load_seconds = 3.0  # a job holds its GPU from before its model load to its end
    config = sample_config(dataset, record, load_seconds=load_seconds, direction_seconds=0.1)
    workflow.write_config(config)
    allocation = (
        "salloc",
        "--gpus=2",
        "--cpus-per-task=2",
        "--mem=2000",
        "srun",
        "--gpus=2",
        "--cpus-per-task=2",
        "--mem=2000",
    )
    workflow.run("translations", "--resources", "gpu=2", prefix=allocation, env=slurm.environment)
    spans: dict[str, tuple[set[str], float, float]] = {}
    allocations = set()
    for line in Path(f"{record}.devices").read_text().splitlines():
        _, device, moment, pid, job = line.split()
        began = float(moment) - load_seconds
        devices, start, end = spans.get(pid, (set(), began, float(moment)))
        spans[pid] = (devices | {device}, min(start, began), max(end, float(moment)))
        allocations.add(job)
    assert len(allocations) == 1 and "local" not in allocations
    (first, first_start, first_end), (second, second_start, second_end) = spans.values()
    assert first_start < second_end and second_start < first_end, "the two jobs did not overlap"
    assert len(first) == len(second) == 1 and first | second == {"0", "1"}


def test_profile_installed_once_then_used_by_name(slurm: LocalSlurm, tmp_path: Path) -> None:
    """`make slurm-profile`, then `snakemake --profile slurm` from the repository root; a run
    whose account is still the placeholder stops before submitting anything."""
    home = tmp_path / "home"
    environment = Workflow.environment({"HOME": str(home), **slurm.environment})
    environment.pop("XDG_CONFIG_HOME", None)
    make = ["make", "--no-print-directory", "-C", str(REPOSITORY), "slurm-profile"]
    said = subprocess.run(make, env=environment, capture_output=True, text=True, check=True)
    installed = home / ".config" / "snakemake" / "slurm" / "config.yaml"
    assert f"edit {installed}" in said.stdout and "slurm_account" in said.stdout
    assert installed.read_text() == (REPOSITORY / "profiles" / "slurm" / "config.yaml").read_text()
    installed.write_text(installed.read_text() + "# edited\n")
    again = subprocess.run(make, env=environment, capture_output=True, text=True, check=True)
    assert "left as it is" in again.stdout and installed.read_text().endswith("# edited\n")

    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "my.yaml").write_text(
        f"dataset: {{path: {SAMPLE}}}\ndirections: {{list: [eng_Latn-fra_Latn]}}\nshards: 1\n"
        "models: [{name: copy, translator: copy-source}]\n"
    )
    # As users type it, from the repository root (only --directory added, to keep it clean).
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        "slurm",
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "my.yaml"),
    ]
    plan = subprocess.run(
        # Each job with its resources, as --quiet without `rules` shows them.
        [*command[:3], "-n", "--quiet", "progress", *command[3:]],
        cwd=REPOSITORY,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    assert "slurm and workflow specific profile workflow/profiles/default" in plan.stderr
    assert "slurm_account=REPLACE-WITH-YOUR-ACCOUNT" in plan.stdout + plan.stderr

    before = set(completed_jobs(slurm))
    run = subprocess.run(command, cwd=REPOSITORY, env=environment, capture_output=True, text=True)
    assert run.returncode != 0
    assert "slurm_account is still the placeholder 'REPLACE-WITH-YOUR-ACCOUNT'" in run.stderr
    assert f"under default-resources in {installed}" in run.stderr
    assert not slurm.active_jobs() and set(completed_jobs(slurm)) == before
    assert not (workdir / ".snakemake" / "slurm_logs").exists()
