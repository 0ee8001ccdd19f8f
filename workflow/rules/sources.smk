# Where the workflow's own files are on this machine (REPOSITORY): the repository it runs from,
# or, when another workflow uses it as a module read from git (snakedeploy's `github(...)`
# declaration, or `gitlab(...)`), a copy of the repository at the module's commit, made
# once under .snakemake/ in the working directory and shared by the jobs. Its package
# (scripts/bouquet_eval) goes first on sys.path, and on the PYTHONPATH of the jobs once the run
# is planned, so that this process and every job it starts import the workflow's own code,
# whatever the environment has installed.
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.sourcecache import HostingProviderFile


def workflow_sources(rules_folder):
    """The folder of the workflow's files, and the git commit it is a copy of (None for a
    local checkout, whose commit git tells)."""
    if isinstance(rules_folder, os.PathLike):
        return Path(rules_folder).parent.parent, None
    # A git+file:// module fails inside Snakemake 9.27 (LocalGitFile.join), whatever it runs.
    if not isinstance(rules_folder, HostingProviderFile):
        raise WorkflowError(
            f"bouquet-eval: cannot run from {rules_folder}: use a local copy of its repository, "
            "or github(...) or gitlab(...) as the module's snakefile"
        )
    repository = rules_folder.hosted_repo.repo
    commit = repository.commit(rules_folder.ref).hexsha
    copy = Path(".snakemake", "bouquet-eval-sources", commit).resolve()
    if not copy.is_dir():
        copy.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=copy.parent, prefix=f"{commit}."))
        with tempfile.TemporaryFile() as archive:
            repository.archive(archive, treeish=commit)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as files:
                files.extractall(partial, filter="data")
        try:
            partial.rename(copy)
        except OSError:  # a job made the same copy meanwhile
            shutil.rmtree(partial)
    return copy, commit


REPOSITORY, SOURCES_COMMIT = workflow_sources(workflow.current_basedir)
PACKAGE_ROOT = str(REPOSITORY / "scripts")
sys.path.insert(0, PACKAGE_ROOT)
try:
    # The package first, from this copy: its console (the logger plugin `bouquet`) waits for
    # it; the rest of the workflow imports it in turn.
    import bouquet_eval.planning.plan
except ModuleNotFoundError as missing:
    raise WorkflowError(
        f"bouquet-eval: the workflow's package needs the Python package '{missing.name}', "
        f"which this environment lacks: install the workflow with its dependencies "
        f"(pip install '{REPOSITORY}', or `make install` in the checkout; docs/design.md "
        "says what `snakemake --lint` needs)"
    ) from None


def give_jobs_the_package(own_folders=()):
    """Put the package first on the PYTHONPATH that jobs inherit, then the folders of code of
    one's own (`python_path`): a job unpickles its plan before any line of its script runs, so
    its environment must find the package; called once Snakemake plans the run
    (planning.smk), as a module's `onstart` is never run.
    """
    wanted = [PACKAGE_ROOT, *own_folders]
    inherited = [
        path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path
    ]
    if inherited[: len(wanted)] != wanted:
        kept = [path for path in inherited if path not in wanted]
        os.environ.update(PYTHONPATH=os.pathsep.join([*wanted, *kept]))
