"""Rule script: every judged system's translations and sentences, as the score jobs take them."""

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.core.names import shown
from bouquet_eval.data.judgements import write_system_inputs


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan = snakemake.params.plan
        table = plan.judgements.load(plan.dataset.directions())
        for system, model in plan.judged.items():
            written = write_system_inputs(table, system, model.folder)
            log.info("%s: %d files written to %s", shown(system), len(written), model.folder)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
