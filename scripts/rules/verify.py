"""Rule script: fail when any model's claimed scores differ from the recomputed ones."""

import pandas as pd

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.results.verify import mismatch_message


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        failures = []
        for model, path in zip(snakemake.params.models, snakemake.input, strict=True):
            message = mismatch_message(model, pd.read_csv(path))
            if message:
                failures.append(f"{message}\n(all values: {path})")
            else:
                log.info("model '%s': every claimed value reproduced (%s)", model, path)
        if failures:
            raise SystemExit("verification failed:\n" + "\n".join(failures))


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
