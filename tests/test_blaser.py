"""BLASER 2.0 (bouquet_eval.metrics.blaser) against sonar-space's own README pipeline.

Tiny random SONAR encoder and BLASER checkpoints (tests/blaser_checkpoints.py) score the
bundled sample's 480 sentence pairs, each with a translation of its own, as a score job scores
them (direction after direction, one metric object for all) and as sonar-space's README does
(tests/blaser_reference.py: each direction's sources, references and translations embedded
in three calls of its `TextToEmbeddingModelPipeline`, then its BLASER model). The tests
marked `blaser` need sonar-space, which lives in an environment of its own (.venv-blaser,
see the Makefile); the others run anywhere.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.hub import HubFiles
from bouquet_eval.metrics import load_metric
from bouquet_eval.metrics.blaser import (
    CHECKPOINT_FILE,
    ENCODER_FILES,
    MODEL_CONFIG,
    Blaser,
    BlaserQE,
)
from bouquet_eval.metrics.records import RECORDS, MetricSet
from bouquet_eval.metrics.sonar_languages import SONAR_CODES, SONAR_LANGUAGES, sonar_code

from .comet_reference import sample_pairs
from .conftest import REPOSITORY, Workflow
from .hf_cache import COMMIT, cache_entry
from .synthetic import write_dataset
from .workflow_configs import bounds_config

FORMS = {"blaser": Blaser, "blaser_qe": BlaserQE}
SONAR_OF_THE_SAMPLE = {
    "arb_Arab": "arb_Arab",
    "cmn_Hans": "zho_Hans",
    "deu_Latn": "deu_Latn",
    "eng_Latn": "eng_Latn",
    "fra_Latn": "fra_Latn",
    "hin_Deva": "hin_Deva",
    "por_Latn_braz1246": "por_Latn",
    "rus_Cyrl": "rus_Cyrl",
    "spa_Latn": "spa_Latn",
}
"""The SONAR code of each language of the sample, as sonar-space's README is told them."""
README_TOLERANCE = 1e-5


@pytest.fixture(autouse=True)
def new_job() -> Iterator[None]:
    """Each test a job of its own: no embeddings, no encoder left by another."""
    from bouquet_eval.metrics import blaser

    blaser._EMBEDDINGS.clear()
    yield
    blaser._EMBEDDINGS.clear()


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, one_thread: None) -> dict[str, Path]:
    from .blaser_checkpoints import build_all

    return build_all(tmp_path_factory.mktemp("blaser-checkpoints"))


@pytest.fixture(scope="session")
def sample_rows() -> pd.DataFrame:
    return sample_pairs()


@pytest.fixture(scope="session")
def readme(
    checkpoints: dict[str, Path],
    sample_rows: pd.DataFrame,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[float]]:
    from .blaser_reference import readme_scores

    return readme_scores(
        Path(sys.executable),
        checkpoints["cards"],
        sample_rows,
        SONAR_OF_THE_SAMPLE,
        tmp_path_factory.mktemp("readme"),
    )


def directions(rows: pd.DataFrame) -> list[pd.DataFrame]:
    """The rows of each direction, in the order they come: what a score job scores in turn."""
    return [part for _, part in rows.groupby(["src_lang", "tgt_lang"], sort=False)]


def score_as_a_job(metric: Blaser, rows: pd.DataFrame, *others: Blaser) -> list[float]:
    """One metric object scoring direction after direction (and `others` after it, each
    direction), the scores in the rows' order."""
    scores = pd.Series(0.0, index=rows.index)
    for part in directions(rows):
        scores[part.index] = metric.score(part)[metric.name]
        for other in others:
            other.score(part)
    return scores.tolist()


def tiny(form: str, checkpoints: dict[str, Path], **settings: Any) -> Blaser:
    return FORMS[form](
        encoder=str(checkpoints["encoder"]),
        checkpoint=str(checkpoints[form]),
        **{"device": "cpu", "dtype": "float32", **settings},
    )


@pytest.mark.blaser
@pytest.mark.parametrize("form", FORMS)
def test_scores_equal_sonar_spaces_readme_pipeline(
    form: str,
    checkpoints: dict[str, Path],
    sample_rows: pd.DataFrame,
    readme: dict[str, list[float]],
) -> None:
    ours = score_as_a_job(tiny(form, checkpoints, batch_size=7), sample_rows)
    assert ours == pytest.approx(readme[form], abs=README_TOLERANCE, rel=0)
    # Not a constant: the random checkpoint tells sentences apart, so a score given to
    # another sentence would be seen.
    assert pd.Series(readme[form]).std() > 100 * README_TOLERANCE


@pytest.mark.blaser
def test_each_source_and_reference_is_embedded_once_per_job(
    checkpoints: dict[str, Path], sample_rows: pd.DataFrame
) -> None:
    """Every call of the encoder gets one language's sentences, each once; a source or a
    reference never goes to it twice in a job, however many directions share it."""
    metric = tiny("blaser", checkpoints)
    pipeline = metric.embeddings().pipeline()
    calls: list[tuple[str, list[str]]] = []
    predict = pipeline.predict

    def counted(sentences: list[str], source_lang: str, **settings: Any) -> Any:
        calls.append((source_lang, list(sentences)))
        return predict(sentences, source_lang=source_lang, **settings)

    pipeline.predict = counted
    score_as_a_job(metric, sample_rows)
    kept = {
        (SONAR_OF_THE_SAMPLE[code], text)
        for role in ("src", "ref")
        for code, text in zip(sample_rows[f"{role}_lang" if role == "src" else "tgt_lang"],
                              sample_rows[f"{role}_text"], strict=True)
    }  # fmt: skip
    sent = [(code, text) for code, sentences in calls for text in sentences]
    assert all(len(set(sentences)) == len(sentences) for _, sentences in calls)
    assert kept <= set(sent)
    assert sum(pair in kept for pair in sent) == len(kept)
    assert metric.embeddings().embedded == len(sent)
    # Shared sentences make it fewer than sonar-space's README embeds: three per row.
    assert len(sent) < 0.7 * 3 * len(sample_rows)
    # One call per language of each direction (its translations beside its references).
    assert len(calls) <= 2 * len(directions(sample_rows))


@pytest.mark.blaser
def test_models_load_once_per_job_and_both_forms_share_the_embeddings(
    checkpoints: dict[str, Path], sample_rows: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fairseq2.models

    loads = []
    load = fairseq2.models.load_model

    def counted(card: Any, **settings: Any) -> Any:
        loads.append(card.name)
        return load(card, **settings)

    monkeypatch.setattr(fairseq2.models, "load_model", counted)
    metric = tiny("blaser", checkpoints, batch_size=5)
    encoder = metric.embeddings().pipeline().model
    lengths: list[int] = []
    forward = encoder.forward

    def measured(seqs: Any, seqs_layout: Any) -> Any:
        lengths.append(seqs.shape[0])
        return forward(seqs, seqs_layout)

    encoder.forward = measured
    score_as_a_job(metric, sample_rows[:96])
    assert len(loads) == 2  # the encoder and the BLASER model, once
    assert max(lengths) == 5 and lengths.count(5) >= len(lengths) // 2
    # The other form, configured alike, scoring each direction after it: one load more (its
    # BLASER model), and no sentence embedded again.
    qe = tiny("blaser_qe", checkpoints, batch_size=5)
    for part in directions(sample_rows[96:192]):
        metric.score(part)
        embedded = metric.embeddings().embedded
        qe.score(part)
        assert metric.embeddings().embedded == embedded
    assert len(loads) == 3 and qe.embeddings() is metric.embeddings()


@pytest.mark.blaser
@pytest.mark.parametrize("form", FORMS)
def test_bfloat16_is_within_verifys_tolerance_of_float32(
    form: str, checkpoints: dict[str, Path], sample_rows: pd.DataFrame
) -> None:
    rows = sample_rows[:120]
    single = score_as_a_job(tiny(form, checkpoints), rows)
    half = score_as_a_job(tiny(form, checkpoints, dtype="bfloat16"), rows)
    largest = max(abs(a - b) for a, b in zip(single, half, strict=True))
    assert 0 < largest <= RECORDS[form].tolerances[form]


@pytest.mark.blaser
def test_hub_ids_load_from_the_cache_alone(
    checkpoints: dict[str, Path],
    sample_rows: pd.DataFrame,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub = tmp_path / "hub"
    encoder, blaser = checkpoints["encoder"], checkpoints["blaser"]
    cache_entry(
        hub,
        "facebook/tiny-sonar",
        {name: (encoder / name).read_bytes() for name in (*ENCODER_FILES, MODEL_CONFIG)},
    )
    cache_entry(
        hub,
        "facebook/tiny-blaser",
        {name: (blaser / name).read_bytes() for name in (CHECKPOINT_FILE, MODEL_CONFIG)},
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))
    metric = Blaser("facebook/tiny-sonar", "facebook/tiny-blaser", device="cpu")
    fields = dict(field.split(":", 1) for field in metric.signature().split("|"))
    assert fields["encoder_commit"] == fields["checkpoint_commit"] == COMMIT
    rows = sample_rows.head(20)
    assert metric.score(rows) == tiny("blaser", checkpoints).score(rows)


@pytest.mark.blaser
def test_a_checkpoint_of_the_other_form_is_refused(
    checkpoints: dict[str, Path], sample_rows: pd.DataFrame
) -> None:
    with pytest.raises(ValueError, match=r"blaser_qe does not load as a model of blaser_2_0_ref"):
        Blaser(str(checkpoints["encoder"]), str(checkpoints["blaser_qe"]), device="cpu").score(
            sample_rows.head(2)
        )


def test_settings_and_signature_without_loading_anything() -> None:
    for name, metric_class in FORMS.items():
        metric = load_metric(name)
        assert isinstance(metric, metric_class) and metric.columns == (name,)
        assert metric.checkpoint == f"facebook/blaser-2.0-{'qe' if 'qe' in name else 'ref'}"
    with pytest.raises(ValueError, match="dtype must be"):
        Blaser(dtype="fp8")
    with pytest.raises(ValueError, match="batch_size must be positive"):
        BlaserQE(batch_size=0)
    fields = dict(part.split(":", 1) for part in Blaser(device="cpu").signature().split("|"))
    assert fields["encoder"] == "facebook/SONAR" and fields["encoder_commit"] == "uncached"
    assert fields["dtype"] == "float32"
    assert Blaser().score(pd.DataFrame(columns=["src_text", "mt_text", "ref_text"])) == {
        "blaser": []
    }


def test_sonar_codes_of_bouquet_codes() -> None:
    assert len(SONAR_CODES) == 202 and len(SONAR_LANGUAGES) == 195
    assert sonar_code("eng_Latn") == "eng_Latn"
    assert sonar_code("por_Latn_braz1246") == "por_Latn"
    assert sonar_code("twi_Latn_akua1239") == "twi_Latn"
    assert (sonar_code("cmn_Hans"), sonar_code("cmn_Hant")) == ("zho_Hans", "zho_Hant")
    assert (sonar_code("kor_Kore"), sonar_code("ekk_Latn")) == ("kor_Hang", "est_Latn")
    # No SONAR code: another language (Aguaruna), another script (Serbian in Latin letters).
    assert sonar_code("agr_Latn") is None and sonar_code("srp_Latn") is None
    # The metric's own mapping comes first, by the whole code or without its glottocode.
    assert sonar_code("zlm_Latn", {"zlm_Latn": "zsm_Latn"}) == "zsm_Latn"
    assert sonar_code("spa_Latn_mexi1248", {"spa_Latn": "spa_Latn"}) == "spa_Latn"
    # Unseen flags read SONAR's languages as the other lists are read: by the language.
    assert SONAR_LANGUAGES.covers("cmn_Hant") and SONAR_LANGUAGES.covers("arz_Arab")
    assert not SONAR_LANGUAGES.covers("zlm_Latn")


def test_records_prefetch_the_encoders_files_and_the_checkpoint(tmp_path: Path) -> None:
    metrics = MetricSet.of(["chrf", "blaser", "blaser_qe"], {})
    config = {name: {k: v["default"] for k, v in (RECORDS[name].settings or {}).items()}
              for name in ("blaser", "blaser_qe")}  # fmt: skip
    metrics = MetricSet.of(["chrf", "blaser", "blaser_qe"], config)
    assert metrics.families() == {"workflow_cpu": ("chrf",), "blaser_gpu": ("blaser", "blaser_qe")}
    assert metrics.joint_environment() == "blaser"
    assert metrics.reference_free_columns() == {"blaser_qe"}
    assert metrics.hub_needs() == [
        HubFiles("facebook/SONAR", None, "blaser.encoder", filename=ENCODER_FILES[0]),
        HubFiles("facebook/SONAR", None, "blaser.encoder", filename=ENCODER_FILES[1]),
        HubFiles("facebook/blaser-2.0-ref", None, "blaser.checkpoint", filename=CHECKPOINT_FILE),
        HubFiles("facebook/SONAR", None, "blaser_qe.encoder", filename=ENCODER_FILES[0]),
        HubFiles("facebook/SONAR", None, "blaser_qe.encoder", filename=ENCODER_FILES[1]),
        HubFiles("facebook/blaser-2.0-qe", None, "blaser_qe.checkpoint", filename=CHECKPOINT_FILE),
    ]
    local = {**config["blaser"], "encoder": str(tmp_path), "checkpoint": str(tmp_path)}
    local["device"] = "cpu"
    on_cpu = MetricSet.of(["blaser"], {"blaser": local})
    assert on_cpu.families() == {"blaser_cpu": ("blaser",)} and on_cpu.hub_needs() == []
    assert on_cpu.provenance()["blaser.encoder"] == {"path": str(tmp_path.resolve())}
    # Unseen: Egyptian Arabic is SONAR's; a language mapped by the user is not.
    mapped = MetricSet.of(["blaser_qe"], {"blaser_qe": {"languages": {"zlm_Latn": "zsm_Latn"}}})
    assert mapped.uncovered("arz_Arab", "eng_Latn") == []
    assert mapped.uncovered("zlm_Latn", "eng_Latn") == ["blaser_qe"]
    assert mapped.refused([]) == []


def sonar_shaped_directions(total: int = 1062) -> list[Direction]:
    """BOUQuET's shape in languages SONAR encodes: each into and out of English, then pairs of
    the others, up to `total`."""
    others = sorted(SONAR_CODES - {"eng_Latn"})
    directions = [Direction(code, "eng_Latn") for code in others]
    directions += [Direction("eng_Latn", code) for code in others]
    pairs = (Direction(a, b) for a, b in itertools.permutations(others, 2))
    return directions + list(itertools.islice(pairs, total - len(directions)))


def test_dry_run_at_benchmark_scale_shows_blasers_jobs_apart(
    workflow: Workflow, tmp_path: Path
) -> None:
    """1062 directions on the Slurm profile: BLASER's jobs are a family of their own, with a
    GPU each, in envs/blaser.yaml (a stand-in `conda` answers Snakemake's questions: no
    conda can be installed here)."""
    write_dataset(tmp_path / "data", sonar_shaped_directions(), sentences=1)
    config = bounds_config(tmp_path / "data", shards=4, metrics=["chrf", "blaser", "blaser_qe"])
    config["models"] = config["models"][:1]
    workflow.write_config(config)
    run = workflow.run(
        "-n", "--profile", str(REPOSITORY / "profiles" / "slurm"), "--quiet", "progress"
    )
    console = re.sub(r"\n {8}", " ", run.stdout + run.stderr)
    assert "1062 directions" in console
    asked = dict(re.findall(r"^ +(score_\S+_copy_source): (.*)$", console, re.MULTILINE))
    assert asked["score_blaser_gpu_copy_source"].startswith("4 jobs,")
    assert "gpu=1" in asked["score_blaser_gpu_copy_source"]
    assert "gpu=0" in asked["score_workflow_cpu_copy_source"]
    conda = tmp_path / "bin" / "conda"
    conda.parent.mkdir()
    conda.write_text(STAND_IN_CONDA)
    conda.chmod(0o755)
    path = f"{conda.parent}{os.pathsep}{os.environ['PATH']}"
    listed = workflow.run("--sdm", "conda", "--list-conda-envs", env={"PATH": path}).stdout
    assert {Path(line.split()[0]).name for line in listed.splitlines()[-2:]} == {
        "blaser.yaml",
        "workflow.yaml",
    }


STAND_IN_CONDA = """#!/bin/sh
case "$1" in
  --version) echo "conda 24.11.0";;
  info) echo '{"conda_prefix": "/nonexistent", "envs_dirs": [], "platform": "linux-64"}';;
  config) echo '{"get": {"channel_priority": "strict"}}';;
  *) echo "stand-in conda cannot $*" >&2; exit 1;;
esac
"""


def test_a_direction_sonar_cannot_encode_is_refused_before_any_job(
    workflow: Workflow, tmp_path: Path
) -> None:
    selected = [Direction("eng_Latn", "fra_Latn"), Direction("eng_Latn", "agr_Latn"),
                Direction("agr_Latn", "eng_Latn"), Direction("srp_Latn", "eng_Latn")]  # fmt: skip
    write_dataset(tmp_path / "data", selected, sentences=1)
    config = bounds_config(tmp_path / "data", shards=1, metrics=["chrf", "blaser"])
    workflow.write_config(config)
    refused = workflow.run("-n", check=False)
    assert refused.returncode == 1
    assert (
        f"bouquet-eval: {workflow.config_path}: blaser cannot score 3 direction(s): SONAR has "
        "no code for agr_Latn (agr_Latn-eng_Latn, eng_Latn-agr_Latn); SONAR has no code for "
        "srp_Latn (srp_Latn-eng_Latn); leave them out of `directions` or map their languages "
        "with `blaser.languages`"
    ) in refused.stderr.splitlines()
    assert not (workflow.workdir / "runs").exists()
    # Mapped to a SONAR code by the user (to be flagged unseen), or left out: planned.
    mapped = {"languages": {"agr_Latn": "spa_Latn", "srp_Latn": "srp_Cyrl"}}
    workflow.write_config({**config, "blaser": mapped})
    assert workflow.planned_jobs()["score_blaser_gpu_copy_source_shard0of1"] == 1
    workflow.write_config({**config, "directions": {"list": ["eng_Latn-fra_Latn"]}})
    assert "score_blaser_gpu_copy_source_shard0of1" in workflow.planned_jobs()
    workflow.write_config({**config, "blaser": {"languages": {"agr_Latn": "agr_Latn"}}})
    assert (
        "agr_Latn is mapped to agr_Latn, which is not a SONAR code"
        in workflow.run("-n", check=False).stderr
    )
