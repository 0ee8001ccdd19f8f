"""Settings decide staleness with their real values; secrets are kept out of what is written;
the translator registry is the one source of truth about built-in translators."""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from bouquet_eval.config import ConfigError, load_schema, validate_config
from bouquet_eval.currency import (
    FileState,
    ResumableOutput,
    _sha256,
    remove_stray_temporaries,
    settings_digest,
)
from bouquet_eval.io import write_jsonl
from bouquet_eval.secrets import (
    REDACTED,
    is_secret_name,
    known_secrets,
    redact,
    redact_command,
)
from bouquet_eval.translate import translation_settings
from bouquet_eval.translators import import_object
from bouquet_eval.translators.backends import BACKENDS

from .conftest import REPOSITORY

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


def test_known_secrets_are_redacted_wherever_they_appear() -> None:
    environ = {"MY_TOKEN": "tok-0123456789", "HF_TOKEN": "hf_abcdefghij", "OTHER": "plain"}
    config = {
        "models": [
            {"translator": "a.b:C", "translator_kwargs": {"token_env": "MY_TOKEN", "x": 1}},
            {"translator": "openai", "api_key_env": "OPENAI_API_KEY"},
        ]
    }
    secrets = known_secrets(config, environ)
    assert secrets == {"tok-0123456789", "hf_abcdefghij"}
    written = {
        "header": "tok-0123456789",  # no secret name, a known value
        "url": "https://x.org/?key=hf_abcdefghij",
        "max_tokens": 512,
        "tokenizer": "google/mt5-xl",
        "auth": "basic something",
        "nested": [{"bearer": {"any": "shape"}}],
        "api_key": None,
    }
    assert redact(written, secrets) == {
        "header": REDACTED,
        "url": REDACTED,
        "max_tokens": 512,
        "tokenizer": "google/mt5-xl",
        "auth": REDACTED,
        "nested": [{"bearer": REDACTED}],
        "api_key": None,
    }
    command = ["snakemake", "--config", "hf_token=abc123", "--x", "y=tok-0123456789/z"]
    assert redact_command(command, secrets) == [
        "snakemake", "--config", f"hf_token={REDACTED}", "--x", f"y={REDACTED}/z",
    ]  # fmt: skip


def test_config_items_on_the_command_line_are_redacted_as_the_configuration_is() -> None:
    """A --config item is read as Snakemake reads it (YAML) and redacted in place: what is
    recorded still reads as the command that was run, its secrets replaced."""
    secrets = frozenset({"tok-0123456789", "short"})
    items = [
        'models=[{name: my2, translator: "mytr:Tr", translator_kwargs: {password: hunter2xyz, '
        'pad_token: "<pad>", token_limit: 77, generation: {forced_bos_token_id: 5}}}]',
        'headers={"Authorization":"Bearer ZZZTOP987", "client_secret":"has space inside"}',
        "x={'bearer': {'any': [shape, 1]}, 'y': '42'}",
        "limit=short",  # a known secret too short to look for inside text, here a whole value
        "hf_token=abc123",
        "layout=\n  bearer:\n    x: 1\n  b: 1\n",  # block YAML: the value goes whole
    ]
    redacted = redact_command(["snakemake", "--config", *items, "--configfile", "c.yaml"], secrets)
    assert redacted == [
        "snakemake",
        "--config",
        'models=[{name: my2, translator: "mytr:Tr", translator_kwargs: {password: <redacted>, '
        'pad_token: "<pad>", token_limit: 77, generation: {forced_bos_token_id: 5}}}]',
        'headers={"Authorization":"<redacted>", "client_secret":"<redacted>"}',
        "x={'bearer': <redacted>, 'y': '42'}",
        f"limit={REDACTED}",
        f"hf_token={REDACTED}",
        f"layout={REDACTED}",
        "--configfile",
        "c.yaml",
    ]
    for item, written in zip(items[:-1], redacted[2:-3], strict=True):  # all but the block
        key, _, value = item.partition("=")
        expected = redact({key: yaml.load(value, Loader=yaml.BaseLoader)}, secrets)
        assert expected == {key: yaml.load(written.split("=", 1)[1], Loader=yaml.BaseLoader)}
    # Both spellings of the option; an argument after the items is no item.
    assert redact_command(["-C", "password=a b", "--config=api_key=k", "token=x"]) == [
        "-C", f"password={REDACTED}", f"--config=api_key={REDACTED}", f"token={REDACTED}",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argument", "written"),
    [
        ('{"Authorization":"Bearer ZZZTOP987"}', '{"Authorization":"<redacted>"}'),
        ('{"client_secret": "has spaces", "n": 1}', '{"client_secret": "<redacted>", "n": 1}'),
        ("{'password': 'it''s me', 'n': 1}", "{'password': '<redacted>', 'n': 1}"),
        ("{bearer: {a: 1, b: [x, y]}, c: 3}", "{bearer: <redacted>, c: 3}"),
        ("Authorization: Bearer abc def", "Authorization: <redacted>"),
        ("curl -H Bearer xyz123", "curl -H Bearer <redacted>"),
        ("https://x.org/?api_key=abc&n=1", "https://x.org/?api_key=<redacted>&n=1"),
        ("secret=two words", "secret=<redacted>"),
        ("{eos_token_id: 2, pad_token: <pad>, max_tokens: 9}", None),
        ("runs/m/eng_Latn-fra_Latn.jsonl", None),
    ],
)  # fmt: skip
def test_other_arguments_lose_the_whole_value_of_a_secret_name(
    argument: str, written: str | None
) -> None:
    assert redact_command(["snakemake", argument]) == ["snakemake", written or argument]


def test_digest_uses_real_values_and_only_a_keyed_hash_of_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from bouquet_eval import currency

    currency._digest_key.cache_clear()
    settings = {"max_tokens": 512, "auth": "secret-one", "x": "known-secret-value"}
    secrets = frozenset({"known-secret-value"})
    digest = settings_digest(settings, secrets)
    assert digest == settings_digest(copy.deepcopy(settings), secrets)
    assert digest != settings_digest({**settings, "max_tokens": 4096}, secrets)
    assert digest != settings_digest({**settings, "auth": "secret-two"}, secrets)
    assert digest != settings_digest({**settings, "x": "another-known-value"}, secrets)
    # The secrets are not what is hashed: the digest of the clear text is another one, and
    # another key (another user's cache folder) gives another digest.
    clear = json.dumps(settings, sort_keys=True, ensure_ascii=False)
    import hashlib

    assert digest != hashlib.sha256(clear.encode()).hexdigest()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other-cache"))
    currency._digest_key.cache_clear()
    assert settings_digest(settings, secrets) != digest
    assert settings_digest({"max_tokens": 512}) == settings_digest({"max_tokens": 512})
    currency._digest_key.cache_clear()


def validated_entry(entry: dict[str, Any]) -> dict[str, Any]:
    config = validate_config({"models": [entry]}, SCHEMA)
    return config["models"][0]


def minimal_entry(translator: str) -> dict[str, Any]:
    backend = BACKENDS[translator]
    required = {key: "value" for key, setting in backend.settings.items() if setting.required}
    return {"name": "m", "translator": translator, **required}


def another_value(schema: dict[str, Any], current: Any) -> Any:
    """A valid value of `schema` other than `current`."""
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if "enum" in schema:
        return next(value for value in schema["enum"] if value != current)
    if "boolean" in types:
        return not current
    if "integer" in types:
        return (current or schema.get("minimum", 1)) + 1
    if "number" in types:
        return current / 2 if "maximum" in schema else (current or 1.0) + 0.5
    if "object" in types:
        return {"changed": True}
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
        assert after.stale_reason() == "its settings changed"


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
    table = text.split("<!-- translator-settings -->", 1)[1].split("\n\n", 1)[0]
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
    """The sidecar of a published output holds the redacted settings and the states."""
    import pandas as pd

    source = tmp_path / "in.parquet"
    source.write_bytes(b"x")
    output = ResumableOutput(
        tmp_path / "out.jsonl",
        {"translator_kwargs": {"hf_token": "hf_secret_value_1", "max_tokens": 7}},
        {"dataset": source},
        frozenset({"hf_secret_value_1"}),
    )
    frame = pd.DataFrame({"mt_text": ["a"]})
    output.publish(lambda path: write_jsonl(path, frame), {"packages": {"x": "1"}})
    record = json.loads(output.sidecar.read_text())
    assert record["settings"] == {"translator_kwargs": {"hf_token": REDACTED, "max_tokens": 7}}
    assert "hf_secret_value_1" not in output.sidecar.read_text()
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
