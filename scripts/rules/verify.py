"""Rule script: fail when any model's claimed scores differ from the recomputed ones."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import JobFailure, SnakemakeJob, job_logging
from bouquet_eval.results.verify import mismatch_message


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        failures = []
        for model, path in zip(snakemake.params.models, snakemake.input, strict=True):
            message = mismatch_message(model, pd.read_csv(path))
            if message:
                # A line per value that does not hold, the last with where they all are.
                *lines, last = message.splitlines()
                failures += [*lines, f"{last}; all values: {Path(path).absolute()}"]
            else:
                log.info("model '%s': every claimed value reproduced (%s)", model, path)
        for failure in failures[:-1]:
            log.error("verification failed: %s", failure)
        if failures:
            raise JobFailure(f"verification failed: {failures[-1]}")


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
