"""Secrets kept out of everything the workflow writes.

Secrets are redacted where something is written (manifest, sidecars, command line, job logs):
values under secret names (`api_key`, `hf_token`, `password`, `auth`, ...; never a word that
merely contains one, such as `max_tokens` or `tokenizer`, nor a tokenizer's special token such
as `pad_token`), and any value equal to a secret the run knows (the variables named by `*_env`
settings, HF_TOKEN, OPENAI_API_KEY), whatever its key.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import yaml

REDACTED = "<redacted>"
# Variables that hold credentials whatever the configuration says.
SECRET_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY")
# A secret shorter than this is redacted where it is a whole value, not inside other text,
# where it would match by accident.
_MIN_EMBEDDED_SECRET = 8

# Words are split at separators and at case changes: `hfToken`, `HFToken` -> hf, token.
_WORD_BOUNDARY = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SECRET_WORDS = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "passphrase",
        "passwd",
        "password",
        "secret",
    }
)
_KEY_QUALIFIERS = frozenset({"access", "api", "private", "secret", "signing"})
# `token` names a credential only as the last word (`hf_token`, `access_token`), and not where
# it is one of a tokenizer's special tokens (`pad_token`, `eos_token`, `forced_bos_token`):
# those settings, like `eos_token_id` or `token_limit`, hold ordinary values.
_SPECIAL_TOKENS = frozenset({"bos", "cls", "eos", "eot", "mask", "pad", "sep", "unk"})


def is_secret_name(key: str) -> bool:
    """Whether a setting of this name holds a secret: a whole word of it names one.

    `hf_token`, `access_token`, `apiKey`, `client_secret` and `auth` do; `max_tokens`,
    `tokenizer`, `pad_token`, `eos_token_id` and `token_limit` do not. A name ending in `_env`
    holds the *name* of a variable, not its value, and is no secret.
    """
    words = [word.lower() for word in _WORD_BOUNDARY.split(key) if word]
    if not words or words[-1] == "env":
        return False
    if _SECRET_WORDS.intersection(words):
        return True
    if words[-1] == "token":
        return len(words) == 1 or words[-2] not in _SPECIAL_TOKENS
    return any(
        word == "key" and index > 0 and words[index - 1] in _KEY_QUALIFIERS
        for index, word in enumerate(words)
    )


def secret_variables(config: Any) -> frozenset[str]:
    """The environment variables that hold secrets: SECRET_VARIABLES and every variable that a
    `*_env` setting of the configuration names."""
    names = set(SECRET_VARIABLES)

    def visit(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if str(key).endswith("_env") and isinstance(item, str):
                    names.add(item)
                visit(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)

    visit(config)
    return frozenset(names)


def secret_values(
    variables: Iterable[str], environ: Mapping[str, str] | None = None
) -> frozenset[str]:
    """The values of those of `variables` that are set."""
    environ = os.environ if environ is None else environ
    return frozenset(environ[name] for name in variables if environ.get(name))


def known_secrets(config: Any, environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The secret values this run can know: those of `secret_variables(config)` that are set."""
    return secret_values(secret_variables(config), environ)


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of `value` fit to be written: secret-named settings and known secrets replaced."""
    secrets = frozenset(secrets)
    return replace_secrets(value, secrets, lambda _: REDACTED)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every known secret in it replaced."""
    for secret in sorted(secrets, key=len, reverse=True):
        if text == secret or (len(secret) >= _MIN_EMBEDDED_SECRET and secret in text):
            text = REDACTED if text == secret else text.replace(secret, REDACTED)
    return text


def replace_secrets(value: Any, secrets: frozenset[str], hide: Callable[[Any], Any]) -> Any:
    """`value` with `hide(item)` in place of each item that `redact` hides."""
    if isinstance(value, Mapping):
        return {
            key: hide(item)
            if is_secret_name(str(key)) and item not in (None, "")
            else replace_secrets(item, secrets, hide)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [replace_secrets(item, secrets, hide) for item in value]
    if isinstance(value, str) and secrets:
        scrubbed = scrub(value, secrets)
        return value if scrubbed == value else hide(value)
    return value


# Snakemake's option whose arguments are KEY=VALUE items of the configuration.
_CONFIG_OPTIONS = ("--config", "-C")


def redact_command(argv: list[str], secrets: Iterable[str] = ()) -> list[str]:
    """The command line with known secrets and values of secret-named keys replaced.

    A `--config` item is read as Snakemake reads it (KEY=VALUE, VALUE in YAML) and redacted as
    the configuration is, in place, so that the recorded command still says what was run. In any
    other argument, the whole value of a secret-named key (`key=value`, `key: value`, JSON or
    YAML, quoted or not, spaces included) and what follows `Bearer ` are replaced.
    """
    secrets = frozenset(secrets)
    redacted = []
    config_items = False  # whether this argument is one of --config's KEY=VALUE items
    for argument in argv:
        argument = scrub(argument, secrets)
        option, equals, item = argument.partition("=")
        if option in _CONFIG_OPTIONS and equals:
            redacted.append(f"{option}={_redact_config_item(item, secrets)}")
        elif config_items and not argument.startswith("-"):
            redacted.append(_redact_config_item(argument, secrets))
        else:
            redacted.append(_redact_assignments(argument))
        if argument.startswith("-"):
            config_items = argument in _CONFIG_OPTIONS
    return redacted


def _redact_config_item(item: str, secrets: frozenset[str]) -> str:
    key, equals, text = item.partition("=")
    if not equals:
        return _redact_assignments(item)
    if is_secret_name(key):
        return f"{key}={REDACTED}" if text else item
    return f"{key}={_redact_yaml(text, secrets)}"


def _redact_yaml(text: str, secrets: frozenset[str]) -> str:
    """`text`, a YAML value, with what `redact` hides replaced where it is written."""
    # Snakemake reads --config values with the BaseLoader: every scalar is a string.
    try:
        root = yaml.compose(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError:
        return _redact_assignments(text)
    if root is None:
        return text
    result = text
    for node in sorted(_nodes_to_hide(root, secrets), key=_start, reverse=True):
        quote = node.style if isinstance(node, yaml.ScalarNode) else None
        result = result[: _start(node)] + _hidden(quote) + result[node.end_mark.index :]
    # A value replaced in place inside block YAML can break the layout: then the whole value goes.
    expected = redact(yaml.load(text, Loader=yaml.BaseLoader), secrets)
    with contextlib.suppress(yaml.YAMLError):
        if yaml.load(result, Loader=yaml.BaseLoader) == expected:
            return result
    return REDACTED


def _hidden(quote: str | None) -> str:
    """REDACTED in the quotes of the value it replaces, if that value began with one."""
    return f"{quote}{REDACTED}{quote}" if quote in ("'", '"') else REDACTED


def _start(node: yaml.Node) -> int:
    return node.start_mark.index


def _nodes_to_hide(node: yaml.Node, secrets: frozenset[str]) -> Iterator[yaml.Node]:
    """The nodes whose values `redact` replaces."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if is_secret_name(str(key.value)) and value.value not in (None, ""):
                yield value
            else:
                yield from _nodes_to_hide(value, secrets)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _nodes_to_hide(item, secrets)
    elif isinstance(node, yaml.ScalarNode) and scrub(node.value, secrets) != node.value:
        yield node


# A key and what assigns it a value: `key=`, `key: `, `"key": ` (JSON), or the scheme of an
# HTTP Authorization header, `Bearer `.
_ASSIGNMENT = re.compile(
    r"""(?<![\w-])(?P<key>[A-Za-z_][\w-]*)(?:["']?\s*[:=]\s*|(?<=(?i:bearer))\s+)"""
)
# A value: quoted, or up to the end of its item (`,` `;` `&` `}` `]`, a line's end).
_VALUE = re.compile(r""""(?:\\.|[^"\\])*"|'(?:''|[^'])*'|[^,;&}\]\n]*""")
_CLOSING = {"{": "}", "[": "]"}


def _redact_assignments(argument: str) -> str:
    pieces, position = [], 0
    for match in _ASSIGNMENT.finditer(argument):
        if match.start() < position or not is_secret_name(match["key"]):
            continue
        start = match.end()
        end = _value_end(argument, start)
        if end == start:
            continue
        pieces += [argument[position:start], _hidden(argument[start])]
        position = end
    return "".join(pieces) + argument[position:]


def _value_end(text: str, start: int) -> int:
    """Where the value that begins at `start` ends: a `{...}` or `[...]` where its bracket
    closes, whatever it holds; any other value as `_VALUE` reads it, without trailing spaces."""
    if start < len(text) and text[start] in _CLOSING:
        depth, position = 0, start
        while position < len(text):
            if text[position] in "'\"":
                position = _value_match(text, position).end()
                continue
            if text[position] in _CLOSING:
                depth += 1
            elif text[position] in _CLOSING.values():
                depth -= 1
                if depth == 0:
                    return position + 1
            position += 1
        return len(text)
    return start + len(_value_match(text, start).group().rstrip())


def _value_match(text: str, start: int) -> re.Match[str]:
    # _VALUE matches everywhere (its last alternative may be empty).
    value = _VALUE.match(text, start)
    assert value is not None
    return value
