"""Rule script: fail when any model's claimed scores differ from the recomputed ones, or hold
values this configuration does not recompute (unless verify.allow_unchecked_claims)."""

import pandas as pd

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
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
                failures.append(f"{message}\n(model {shown(model)}: {checked}; all values: {path})")
            else:
                log.info(
                    "model %s: every value checked reproduced; %s (%s)", shown(model), checked, path
                )
        if failures:
            raise SystemExit("verification failed:\n" + "\n".join(failures))


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
