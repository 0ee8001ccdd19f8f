"""Settings decide staleness with their real values; the configuration holds no secret;
the translator registry is the one source of truth about built-in translators."""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bouquet_eval.core.config import ConfigError, import_object
from bouquet_eval.core.freshness import (
    FileState,
    ResumableOutput,
    _sha256,
    remove_stray_temporaries,
    settings_digest,
)
from bouquet_eval.core.io import write_jsonl
from bouquet_eval.core.secrets import (
    REDACTED,
    is_secret_name,
    known_secrets,
    redact_command,
    refuse_secrets,
)
from bouquet_eval.data.dataset import resolve_dataset
from bouquet_eval.planning.plan import translation_settings
from bouquet_eval.planning.schema import load_schema, validate_config
from bouquet_eval.translation.translate import translate_model
from bouquet_eval.translators.backends import BACKENDS

from .conftest import REPOSITORY, SAMPLE

SCHEMA = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"


@pytest.mark.parametrize(
    "name",
    ["api_key", "apiKey", "APIKey", "API-KEY", "apikey", "hf_token", "access_token", "token",
     "authToken", "auth_token", "hfToken", "HFToken", "HF_TOKEN", "refresh_token", "password",
     "db_passwd", "client_secret", "secret", "token_secret", "authorization", "auth", "bearer",
     "credentials", "private_key", "aws_secret_access_key", "session_cookie"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "max_new_tokens", "tokenizer", "batch_tokens", "tokens", "api_key_env",
     "token_env", "key", "keyboard", "author", "authority", "secretary", "model", "seed",
     "pad_token", "eos_token", "bos_token", "unk_token", "sep_token", "cls_token", "mask_token",
     "forced_bos_token", "padToken", "additional_special_tokens", "eos_token_id", "pad_token_id",
     "forced_bos_token_id", "decoder_start_token_id", "eos_token_ids", "token_limit",
     "token_type", "tokenizer_kwargs"],
)  # fmt: skip
def test_names_that_merely_contain_a_secret_word(name: str) -> None:
    assert not is_secret_name(name)


NAMED = "a value under a secret name"
ENVIRON = {"MY_TOKEN": "tok-0123456789", "HF_TOKEN": "hf_abcdefghij", "OTHER": "plain-value-1"}


def own_model(**kwargs: Any) -> dict[str, Any]:
    """A configuration with a translator of one's own taking `kwargs`, whose key is in MY_TOKEN."""
    kwargs = {"token_env": "MY_TOKEN", **kwargs}
    return {"models": [{"name": "m", "translator": "a.b:C", "translator_kwargs": kwargs}]}


@pytest.mark.parametrize(
    ("setting", "key", "holds"),
    [
        ({"default_headers": {"Authorization": "Bearer x"}},
         "models[0].translator_kwargs.default_headers.Authorization", NAMED),
        ({"api_key": "sk-1"}, "models[0].translator_kwargs.api_key", NAMED),
        ({"hf_token": 12345}, "models[0].translator_kwargs.hf_token", NAMED),
        ({"auth": {"any": "shape"}}, "models[0].translator_kwargs.auth", NAMED),
        ({"header": "tok-0123456789"}, "models[0].translator_kwargs.header",
         "the value of the secret variable MY_TOKEN"),
        ({"urls": ["https://x.org/?k=hf_abcdefghij"]}, "models[0].translator_kwargs.urls[0]",
         "the value of the secret variable HF_TOKEN"),
        ({"path": "${HF_TOKEN}/x"}, "models[0].translator_kwargs.path",
         "$HF_TOKEN, which expands to a secret"),
    ],
)  # fmt: skip
def test_a_configuration_holding_a_secret_is_an_error(
    setting: dict[str, Any], key: str, holds: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        refuse_secrets(own_model(**setting), ENVIRON)
    assert raised.value.key == key
    assert str(raised.value).startswith(f"{key} holds {holds}: the configuration never holds a")
    assert "api_key_env" in str(raised.value)
    for secret in ("sk-1", "12345", "Bearer", "tok-0123456789", "hf_abcdefghij"):
        assert secret not in str(raised.value)


def test_settings_that_hold_no_secret_pass() -> None:
    refuse_secrets(
        own_model(
            api_key=None, password="", auth={}, token=True, use_auth_token=False,
            pad_token="<pad>", eos_token_id=2, max_tokens=512, tokenizer="google/mt5-xl",
            # The value of a variable that holds no secret, the name of one that does.
            note="plain-value-1", prompt="say $MY_TOKENS or $OTHER", header="MY_TOKEN",
        ),
        ENVIRON,
    )  # fmt: skip


def test_a_placeholder_key_matches_no_setting() -> None:
    """Local servers take any key, and EMPTY is the usual one: shorter than any credential, it
    would otherwise stop a configuration that merely says the same word."""
    refuse_secrets(own_model(mode="EMPTY"), {"OPENAI_API_KEY": "EMPTY", "MY_TOKEN": "test"})
    with pytest.raises(ConfigError):
        refuse_secrets(own_model(mode="sk-proj-0123"), {"OPENAI_API_KEY": "sk-proj-0123"})


def test_a_model_entry_given_by_hand_holds_no_secret(tmp_path: Path) -> None:
    dataset = resolve_dataset({"path": str(SAMPLE)})
    entry = {"translator": "a.b:C", "translator_kwargs": {"api_key": "sk-1"}}
    with pytest.raises(ConfigError, match=r"^translator_kwargs\.api_key holds a value under a"):
        translate_model(entry, dataset.directions(), dataset, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_recorded_command_line_has_known_secrets_scrubbed() -> None:
    secrets = known_secrets(own_model(), ENVIRON)
    assert secrets == {"tok-0123456789", "hf_abcdefghij"}
    command = ["snakemake", "--set-resources", "x:slurm_extra='--comment=tok-0123456789'", "-n"]
    assert redact_command(command, secrets) == [
        "snakemake", "--set-resources", f"x:slurm_extra='--comment={REDACTED}'", "-n",
    ]  # fmt: skip


def test_the_digest_is_the_sha256_of_the_canonical_settings() -> None:
    """Settings hold no secret: their digest is a plain hash, the same value as the digests
    that existing outputs recorded (so that they stay current)."""
    settings = {
        "model": {
            "translator": "openai",
            "settings": {"model": "gpt-x", "base_url": "http://localhost:8000/v1",
                         "api_key_env": "OPENAI_API_KEY", "temperature": 0.0,
                         "max_tokens": None, "pad_token": "<pad>"},
            "prompt_fn": None,
            "prompt_kwargs": None,
            "prompt_template": "Translate {src} to {tgt}: «x»",
        },
        "limit": 5,
        "shard": (1, 2),
    }  # fmt: skip
    digest = settings_digest(settings)
    # Computed by the previous release, which kept an HMAC of secrets: these settings have none.
    assert digest == "5a7b401a30a31dc43069c214bbf8b8b80d987b7343f499251327b9cc2909b079"
    canonical = json.dumps(settings, sort_keys=True, ensure_ascii=False)
    assert digest == hashlib.sha256(canonical.encode()).hexdigest()
    assert digest == settings_digest(copy.deepcopy(settings))
    assert digest != settings_digest({**settings, "limit": 6})


def validated_entry(entry: dict[str, Any]) -> dict[str, Any]:
    config = validate_config({"models": [entry]}, SCHEMA)
    return config["models"][0]


def minimal_entry(translator: str) -> dict[str, Any]:
    backend = BACKENDS[translator]
    required = {key: "value" for key, setting in backend.settings.items() if setting.required}
    return {"name": "m", "translator": translator, **required}


def another_value(schema: Mapping[str, Any], current: Any) -> Any:
    """A valid value of `schema` other than `current`."""
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if "enum" in schema:
        return next(value for value in schema["enum"] if value != current)
    if "boolean" in types:
        return not current
    if "integer" in types:
        return (current or schema.get("minimum", 1)) + 1
    if "number" in types:
        return (current or 1.0) / 2 if "maximum" in schema else (current or 1.0) + 0.5
    if "object" in types:
        return {"changed": True}
    if "array" in types:
        return ["changed"]
    candidates = ["cpu", "cuda:1", "OTHER_VARIABLE", "something else"]
    pattern = schema.get("pattern")
    return next(
        value
        for value in candidates
        if value != current and (pattern is None or re.search(pattern, value))
    )


SETTINGS = [
    (translator, name) for translator, backend in BACKENDS.items() for name in backend.settings
]


@pytest.mark.parametrize(("translator", "name"), SETTINGS)
def test_every_setting_but_speed_makes_translations_stale(
    tmp_path: Path, translator: str, name: str
) -> None:
    """Derived from the registry: a translated direction is stale after a change of any setting
    of its translator, except those that only change speed."""
    setting = BACKENDS[translator].settings[name]
    entry = validated_entry(minimal_entry(translator))
    changed = {**entry, name: another_value(dict(setting.schema), entry[name])}
    assert validated_entry(copy.deepcopy(changed)) == changed
    dataset = tmp_path / "dataset.parquet"
    dataset.write_bytes(b"the direction's sentences")
    made = ResumableOutput(
        tmp_path / "eng_Latn-fra_Latn.jsonl",
        translation_settings(entry, None),
        {"dataset": dataset},
    )
    made.publish(lambda path: path.write_text("translations\n"))
    assert made.is_current()
    after = ResumableOutput(made.path, translation_settings(changed, None), made.inputs)
    if setting.operational:
        assert after.stale_reason() is None
    else:
        assert after.stale_reason() == f"its settings changed: model.settings.{name} (" + (
            f"{json.dumps(entry[name])} -> {json.dumps(changed[name])})"
        )


def test_registry_matches_each_translator_class() -> None:
    """Same names, same defaults: a default changed in one place shows up here."""
    for translator, backend in BACKENDS.items():
        parameters = inspect.signature(import_object(backend.factory)).parameters
        context = {"cache_dir"} if backend.request_cache else set()
        context |= {"limit"} if backend.takes_limit else set()
        assert set(parameters) == {*backend.settings, *context, *backend.internal}, translator
        for name, setting in backend.settings.items():
            parameter = parameters[name]
            if setting.required:
                assert parameter.default is inspect.Parameter.empty, (translator, name)
            else:
                assert parameter.default == setting.default, (translator, name)


def test_config_readme_lists_every_setting_with_its_default() -> None:
    text = (REPOSITORY / "config" / "README.md").read_text(encoding="utf-8")
    table = text.split("<!-- generated: translator_settings_table() -->", 1)[1]
    table = table.split("<!-- end of generated table -->", 1)[0]
    documented: dict[tuple[str, str], Any] = {}
    for line in table.splitlines()[2:]:
        translators, name, default, _ = (cell.strip() for cell in line.strip("|").split("|", 3))
        for translator in re.findall(r"`([^`]+)`", translators):
            value = "required" if default == "required" else json.loads(default.strip("`"))
            documented[(translator, name.strip("`"))] = value
    expected = {
        (translator, name): "required" if setting.required else setting.default
        for translator, backend in BACKENDS.items()
        for name, setting in backend.settings.items()
    }
    assert documented == expected


def test_schema_comes_from_the_registry() -> None:
    schema = load_schema(SCHEMA)
    entry = validated_entry({"name": "o", "translator": "openai", "model": "m"})
    assert entry["api_key_env"] == "OPENAI_API_KEY" and entry["max_tokens"] is None
    assert validated_entry({**minimal_entry("openai"), "api_key_env": None})["api_key_env"] is None
    aya = validated_entry({**minimal_entry("aya"), "allow_untrained_languages": True})
    assert aya["allow_untrained_languages"] is True
    with pytest.raises(ConfigError, match=r"'max_tokens' is not one of"):
        validated_entry({**minimal_entry("nllb"), "max_tokens": 5})
    with pytest.raises(ConfigError, match=r"'prompt_fn' is not one of"):
        validated_entry({**minimal_entry("provided"), "prompt_fn": "a.b:c"})
    language = {"type": "string", "pattern": schema["$defs"]["language"]["pattern"]}
    jsonschema.validate("por_Latn_braz1246", language)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("por_Latn_brazil", language)


def test_written_translations_name_their_record(tmp_path: Path) -> None:
    """The sidecar of a published output holds the settings and the states."""
    import pandas as pd

    source = tmp_path / "in.parquet"
    source.write_bytes(b"x")
    output = ResumableOutput(
        tmp_path / "out.jsonl",
        {"translator_kwargs": {"token_env": "HF_TOKEN", "max_tokens": 7}},
        {"dataset": source},
    )
    frame = pd.DataFrame({"mt_text": ["a"]})
    output.publish(lambda path: write_jsonl(path, frame), {"packages": {"x": "1"}})
    record = json.loads(output.sidecar.read_text())
    assert record["settings"] == {"translator_kwargs": {"token_env": "HF_TOKEN", "max_tokens": 7}}
    assert set(record) == {"digest", "settings", "inputs", "output", "environment"}
    assert record["environment"] == {"packages": {"x": "1"}}


def test_a_new_modification_time_alone_is_remembered(tmp_path: Path) -> None:
    """Snakemake re-times the outputs of a job that ran: the content is hashed once, found the
    same, and the new times recorded, so that later checks need only a stat."""
    source = tmp_path / "in.parquet"
    source.write_bytes(b"x")
    output = ResumableOutput(tmp_path / "out.jsonl", {"a": 1}, {"dataset": source})
    output.publish(lambda path: path.write_text("translations\n"))
    later = output.path.stat().st_mtime_ns + 5_000_000_000
    for path in (output.path, source):
        os.utime(path, ns=(later, later))
    assert output.stale_reason() is None
    record = json.loads(output.sidecar.read_text())
    assert record["output"]["mtime_ns"] == record["inputs"]["dataset"]["mtime_ns"] == later
    output.path.write_text("translationz\n")  # same size, new content
    assert output.stale_reason() == "its content is not what was written (damaged or edited)"


def test_outputs_of_the_same_inputs_hash_each_input_once(tmp_path: Path) -> None:
    """As a model's four aggregates: each scored file is read once, unless it is rewritten."""
    inputs = {f"d{number}": tmp_path / f"d{number}.parquet" for number in range(3)}
    for path in inputs.values():
        path.write_bytes(b"scores")
    outputs = [ResumableOutput(tmp_path / name, {}, inputs) for name in ("a.csv", "b.csv")]
    hashed_before = _sha256.cache_info().misses
    for output in outputs:
        output.path.write_text("aggregate\n")
        output.record_written()
    # Each input once, then each output (its own file) once.
    assert _sha256.cache_info().misses - hashed_before == len(inputs) + len(outputs)
    inputs["d0"].write_bytes(b"Scores")  # same size, new content
    assert FileState.of(inputs["d0"]).sha256 == hashlib.sha256(b"Scores").hexdigest()


def test_a_published_output_is_hashed_once(tmp_path: Path) -> None:
    """The output in place is a copy of its cached copy, hashed when it was written: its record
    takes that hash instead of reading the copy again; the hash is the content's."""
    source = tmp_path / "in.parquet"
    source.write_bytes(b"x")
    output = ResumableOutput(tmp_path / "out.jsonl", {"a": 2}, {"dataset": source})
    hashed_before = _sha256.cache_info().misses
    output.publish(lambda path: path.write_text("translations\n"))
    assert _sha256.cache_info().misses - hashed_before == 2  # the input, the cached copy
    record = json.loads(output.sidecar.read_text())
    assert record["output"]["sha256"] == hashlib.sha256(b"translations\n").hexdigest()
    assert record["output"]["size"] == output.path.stat().st_size
    output.path.unlink()
    assert output.restore_from_cache()
    assert json.loads(output.sidecar.read_text())["output"] == {
        **record["output"],
        "mtime_ns": output.path.stat().st_mtime_ns,
    }
    assert output.is_current()


def test_stray_temporaries_of_the_outputs_go_and_others_stay(tmp_path: Path) -> None:
    """What killed writes of a job's outputs left (the output, its record, its cached copy) is
    deleted; a temporary of another output, another job's write in progress, stays."""
    source = tmp_path / "source.txt"
    source.write_text("source")
    outputs = [
        ResumableOutput(tmp_path / name, {"n": 1}, {"source": source}) for name in ("a.txt", "b")
    ]
    (first, second) = outputs
    strays = [
        tmp_path / ".a.txt.k2j4_x9q.tmp",
        tmp_path / ".b.x1y2z3.tmp",
        first.sidecar.parent / ".a.txt.json.abc123.tmp",
        first.cached.parent / ".a.txt.zz.tmp",
        second.cached.parent / ".b.json.qq.tmp",
    ]
    others = [tmp_path / ".c.txt.k2j4_x9q.tmp", tmp_path / ".a.x1y2z3.tmp", tmp_path / "a.txt.tmp"]
    for path in strays + others:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("half a file")
    assert sorted(remove_stray_temporaries(outputs)) == sorted(strays)
    assert not any(path.exists() for path in strays)
    assert all(path.exists() for path in others)
    assert remove_stray_temporaries(outputs) == []


def test_a_stale_output_names_each_setting_that_changed() -> None:
    """What a person reads in a dry run: each setting a change, or a release that adds or
    removes one, makes differ from what an output was made with, with both values."""
    from bouquet_eval.core.freshness import StaleOutput, describe, settings_change

    recorded = {"model": {"settings": {"temperature": 0.0, "dropped": 1}}, "limit": None}
    current = {"model": {"settings": {"temperature": 0.5, "added": "x"}}, "limit": None}
    change = settings_change(recorded, current)
    assert change == (
        'model.settings.added (new: "x"); model.settings.dropped (no longer a setting; was 1); '
        "model.settings.temperature (0.0 -> 0.5)"
    )
    stale = [
        StaleOutput(Path(f"runs/m/{n}.jsonl"), f"its settings changed: {change}") for n in "ab"
    ]
    stale.append(StaleOutput(Path("runs/m/c.jsonl"), "its dataset (d.parquet) changed"))
    lines = describe(stale).splitlines()
    assert lines[:3] == [
        "3 existing output(s) are not current and will be rebuilt:",
        f"  2 because its settings changed: {change}",
        "  1 because its dataset (d.parquet) changed",
    ]
