"""Rule script: fail when any model's claimed scores differ from the recomputed ones, or hold
values this configuration does not recompute (unless verify.allow_unchecked_claims)."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import JobFailure, SnakemakeJob, job_logging
from bouquet_eval.core.names import shown
from bouquet_eval.results.verify import mismatch_message, what_was_checked


def main(snakemake: SnakemakeJob) -> None:
    allow_unchecked = snakemake.params.allow_unchecked_claims
    with job_logging(snakemake.log[0]) as log:
        failures = []
        for model, path in zip(snakemake.params.models, snakemake.input, strict=True):
            verification = pd.read_csv(path, keep_default_na=False, na_values=[""])
            checked = what_was_checked(verification)
            message = mismatch_message(model, verification, allow_unchecked)
            if message:
                log.info("model %s: %s", shown(model), checked)
                # A line per value that does not hold, the last with where they all are.
                *lines, last = message.splitlines()
                failures += [*lines, f"{last}; all values: {Path(path).absolute()}"]
            else:
                log.info(
                    "model %s: every value checked reproduced; %s (%s)", shown(model), checked, path
                )
        for failure in failures[:-1]:
            log.error("verification failed: %s", failure)
        if failures:
            raise JobFailure(f"verification failed: {failures[-1]}")


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
