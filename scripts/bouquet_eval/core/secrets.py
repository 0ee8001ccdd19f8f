"""Secrets: never in the configuration, and scrubbed from what jobs print.

The configuration never holds a secret (`refuse_secrets`, checked while planning, before any job
starts): a setting under a secret name (`api_key`, `hf_token`, `password`, `auth`, ...; never a
word that merely contains one, such as `max_tokens` or `tokenizer`, nor a tokenizer's special
token such as `pad_token`) that is not empty, or any text holding the value of a secret the run
knows (the variables named by `*_env` settings, HF_TOKEN, OPENAI_API_KEY), is a configuration
error. Secrets travel in environment variables, which settings name. So the configuration, and
every setting, record and digest derived from it, can be written as it is.

What the environment's secrets can still reach is scrubbed (`scrub`): job logs and tracebacks (a
library may print a key it read from the environment), the run's recorded command line, and
translations before they are written or cached (an endpoint may echo its key).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from bouquet_eval.core.config import ConfigError

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


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every known secret in it replaced."""
    for secret in sorted(secrets, key=len, reverse=True):
        if text == secret or (len(secret) >= _MIN_EMBEDDED_SECRET and secret in text):
            text = REDACTED if text == secret else text.replace(secret, REDACTED)
    return text


def redact_command(argv: Iterable[str], secrets: Iterable[str]) -> list[str]:
    """The command line with every known secret scrubbed from each argument; the configuration
    it gives (`--config` items) holds none, or the run stopped while planning."""
    return [scrub(argument, secrets) for argument in argv]


HOW_TO_PASS_SECRETS = (
    "the configuration never holds a secret (it is copied into job scripts, records and logs): "
    "put it in an environment variable and name that variable in the model's api_key_env "
    "(a translator of one's own reads it from the environment itself)"
)


def refuse_secrets(config: Any, environ: Mapping[str, str] | None = None) -> None:
    """Raise a ConfigError naming the first setting of `config` that holds a secret."""
    environ = os.environ if environ is None else environ
    # A value shorter than any credential (a placeholder such as EMPTY, which local servers take
    # as a key) would match ordinary settings by accident.
    known = {
        name: environ[name]
        for name in sorted(secret_variables(config))
        if len(environ.get(name) or "") >= _MIN_EMBEDDED_SECRET
    }
    found = _secret_setting(config, known, "")
    if found is not None:
        key, what = found
        raise ConfigError(f"{key} holds {what}: {HOW_TO_PASS_SECRETS}", key, key_is_set=True)


def _secret_setting(value: Any, known: Mapping[str, str], location: str) -> tuple[str, str] | None:
    """(key, what it holds) of the first setting under `location` that holds a secret."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{location}.{key}" if location else str(key)
            if is_secret_name(str(key)) and _is_given(item):
                return here, "a value under a secret name"
            if (found := _secret_setting(item, known, here)) is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if (found := _secret_setting(item, known, f"{location}[{index}]")) is not None:
                return found
    elif isinstance(value, str):
        for name, secret in known.items():
            if scrub(value, [secret]) != value:
                return location or "(top level)", f"the value of the secret variable {name}"
            # Paths are expanded from the environment (config.expand_path).
            if re.search(rf"\$(?:{re.escape(name)}\b|\{{{re.escape(name)}\}})", value):
                return location or "(top level)", f"${name}, which expands to a secret"
    return None


def _is_given(value: Any) -> bool:
    """Whether a setting under a secret name holds a value: not empty, nor a flag such as
    Hugging Face's `token: true` (use the token stored by `hf auth login`)."""
    return value not in (None, "", [], {}) and not isinstance(value, bool)
