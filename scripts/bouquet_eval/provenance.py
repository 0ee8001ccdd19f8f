"""Provenance of outputs: what produced them, whether they are current, secrets kept out.

Two rules hold everywhere:
- Staleness is decided on the real settings. A settings digest covers every value with its
  real content; a secret enters it only as a keyed hash (HMAC), never in clear.
- Secrets are redacted where something is written (manifest, sidecars, command line, job
  logs): values under secret names (`api_key`, `hf_token`, `password`, `auth`, ...; never a word
  that merely contains one, such as `max_tokens` or `tokenizer`, nor a tokenizer's special
  token such as `pad_token`), and any value equal to a secret the run knows (the variables named
  by `*_env` settings, HF_TOKEN, OPENAI_API_KEY), whatever its key.

An output is *current* when its sidecar record says it was produced with the expected settings
digest from inputs with the content they have now, and the output still has the content that
was written. The same check runs when a run plans (bouquet_eval.planning) and inside the job.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets as random_secrets
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import Any

import yaml

from bouquet_eval.io import file_sha256, write_atomically, write_json

log = logging.getLogger(__name__)

REDACTED = "<redacted>"
# The workflow records its command line here, since rule jobs run in other processes.
COMMAND_ENVIRONMENT_VARIABLE = "BOUQUET_EVAL_COMMAND"
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


def known_secrets(config: Any, environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The secret values this run can know: SECRET_VARIABLES and every variable that a `*_env`
    setting of the configuration names, where set."""
    environ = os.environ if environ is None else environ
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
    return frozenset(environ[name] for name in names if environ.get(name))


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of `value` fit to be written: secret-named settings and known secrets replaced."""
    secrets = frozenset(secrets)
    return _replace_secrets(value, secrets, lambda _: REDACTED)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every known secret in it replaced."""
    for secret in sorted(secrets, key=len, reverse=True):
        if text == secret or (len(secret) >= _MIN_EMBEDDED_SECRET and secret in text):
            text = REDACTED if text == secret else text.replace(secret, REDACTED)
    return text


def _replace_secrets(value: Any, secrets: frozenset[str], hide: Callable[[Any], Any]) -> Any:
    if isinstance(value, Mapping):
        return {
            key: hide(item)
            if is_secret_name(str(key)) and item not in (None, "")
            else _replace_secrets(item, secrets, hide)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_replace_secrets(item, secrets, hide) for item in value]
    if isinstance(value, str) and secrets:
        scrubbed = scrub(value, secrets)
        return value if scrubbed == value else hide(value)
    return value


def settings_digest(settings: Any, secrets: Iterable[str] = ()) -> str:
    """A digest of `settings` that changes whenever any value does.

    Secrets (by name or by value, as `redact` finds them) enter as an HMAC under a key kept in
    the user's cache folder, so that the digest, which is written beside every output, can be
    neither read back nor guessed from a list of candidate secrets.
    """
    keyed = _replace_secrets(settings, frozenset(secrets), _keyed_hash)
    canonical = json.dumps(keyed, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _keyed_hash(value: Any) -> str:
    message = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()
    return "hmac-sha256:" + hmac.new(_digest_key(), message, hashlib.sha256).hexdigest()


@cache
def _digest_key() -> bytes:
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bouquet-eval"
    path = folder / "secret-digest.key"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(random_secrets.token_bytes(32))
    return path.read_bytes()


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
                position = _VALUE.match(text, position).end()
                continue
            if text[position] in _CLOSING:
                depth += 1
            elif text[position] in _CLOSING.values():
                depth -= 1
                if depth == 0:
                    return position + 1
            position += 1
        return len(text)
    value = _VALUE.match(text, start)
    return start + len(value.group().rstrip())


@dataclass(frozen=True)
class FileState:
    """What a file held when it was recorded."""

    sha256: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileState:
        status = path.stat()
        identity = (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
        return cls(_sha256(path, identity), status.st_size, status.st_mtime_ns)

    def matches(self, path: Path) -> bool:
        """Whether `path` still holds this content (hashed only when its stat changed)."""
        try:
            status = path.stat()
        except FileNotFoundError:
            return False
        if status.st_size != self.size:
            return False
        return status.st_mtime_ns == self.mtime_ns or file_sha256(path) == self.sha256


@lru_cache(maxsize=1 << 14)
def _sha256(path: Path, identity: tuple[int, ...]) -> str:
    """The file's hash, computed once in a process while its inode, size and times stay the same
    (a rewrite changes them): the aggregate job records four outputs made from every scored file
    of the model, and hashes each file once instead of four times."""
    return file_sha256(path)


@dataclass(frozen=True)
class ResumableOutput:
    """A file recomputed only when what produces it changes, and rebuilt when damaged.

    Beside `path` live two things Snakemake does not know about and so never deletes:
    - `.provenance/<name>.json`: the settings digest, the state of each input and of the output
      when it was written, the redacted settings and the producing job's environment;
    - `.cache/<key>/<name>`: a verified copy written as soon as the output is done, keyed by
      the digest and the inputs, so that work survives a job that fails later (Snakemake then
      removes or restores its outputs) and a damaged output can be restored.
    `settings` hold real values; `secrets` are the run's known secrets (see `known_secrets`).
    """

    path: Path
    settings: Mapping[str, Any]
    inputs: Mapping[str, Path] = field(default_factory=dict)
    """Role -> file whose content the output was made from (`dataset`, `translations`, ...)."""
    secrets: frozenset[str] = frozenset()
    cache_variant: Any = None
    """What else the job knows decides the content (e.g. metric versions), for the cache key."""

    @cached_property
    def digest(self) -> str:
        return settings_digest(self.settings, self.secrets)

    @property
    def sidecar(self) -> Path:
        return self.path.parent / ".provenance" / f"{self.path.name}.json"

    def record(self) -> dict[str, Any] | None:
        try:
            record = json.loads(self.sidecar.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return record if isinstance(record, dict) else None

    def stale_reason(self) -> str | None:
        """Why the output is not current, or None when it is."""
        if not self.path.is_file():
            return "missing"
        record = self.record()
        if record is None or "output" not in record:
            return "no record of what produced it"
        if record.get("digest") != self.digest:
            return "its settings changed"
        recorded_inputs = record.get("inputs") or {}
        if set(recorded_inputs) != set(self.inputs):
            return "its inputs changed"
        for role, path in sorted(self.inputs.items()):
            if not _state(recorded_inputs[role]).matches(path):
                return f"its {role} ({path}) changed"
        if not _state(record["output"]).matches(self.path):
            return "its content is not what was written (damaged or edited)"
        self._remember_times(record)
        return None

    def _remember_times(self, record: dict[str, Any]) -> None:
        """After a check that had to hash files whose modification time changed (Snakemake
        refreshes the times of every output of a job that ran), record the new times, so that
        the next check is a `stat` again. The contents were found the same."""
        states = [(record["output"], self.path)]
        states += [(record["inputs"][role], path) for role, path in self.inputs.items()]
        changed = False
        for state, path in states:
            mtime = path.stat().st_mtime_ns
            if state["mtime_ns"] != mtime:
                state["mtime_ns"] = mtime
                changed = True
        if changed:
            write_json(self.sidecar, record)

    def is_current(self) -> bool:
        return self.stale_reason() is None

    @cached_property
    def input_states(self) -> dict[str, FileState]:
        return {role: FileState.of(path) for role, path in sorted(self.inputs.items())}

    @property
    def cached(self) -> Path:
        inputs = {role: state.sha256 for role, state in self.input_states.items()}
        key = settings_digest([self.digest, inputs, self.cache_variant])
        return self.path.parent / ".cache" / key[:16] / self.path.name

    def restore_from_cache(self, environment: Mapping[str, Any] | None = None) -> bool:
        """Publish the cached copy if there is one and it is intact; discard a damaged one."""
        if not self.cached.is_file():
            return False
        try:
            expected = json.loads(_checksum_file(self.cached).read_text(encoding="utf-8"))
            intact = _state(expected).sha256 == file_sha256(self.cached)
        except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
            intact = False
        if not intact:
            log.warning("discarding %s: its content does not match its checksum", self.cached)
            for path in (self.cached, _checksum_file(self.cached)):
                path.unlink(missing_ok=True)
            return False
        self._publish_cached(environment)
        return True

    def publish(
        self, write: Callable[[Path], None], environment: Mapping[str, Any] | None = None
    ) -> None:
        """Write the output through `write(path)`: into the cache first, then in place.

        `environment` (what the job ran with: versions, hardware, model commits) goes into the
        record for the manifest; it does not decide currency.
        """
        write_atomically(self.cached, write)
        write_json(_checksum_file(self.cached), asdict(FileState.of(self.cached)))
        self._publish_cached(environment)

    def _publish_cached(self, environment: Mapping[str, Any] | None) -> None:
        write_atomically(self.path, lambda temporary: shutil.copyfile(self.cached, temporary))
        self.record_written(environment)

    def record_written(self, environment: Mapping[str, Any] | None = None) -> None:
        """Record that `path` was just written from the inputs as they are now.

        `publish` calls it; an output written by other means (one without a cached copy, such
        as a model's aggregates) calls it after writing.
        """
        record = {
            "digest": self.digest,
            "settings": redact(self.settings, self.secrets),
            "inputs": {role: asdict(state) for role, state in self.input_states.items()},
            "output": asdict(FileState.of(self.path)),
            "environment": dict(environment or {}),
        }
        write_json(self.sidecar, record)

    def remove_stray_temporaries(self) -> list[Path]:
        """Delete temporary files that killed writes of this output left behind.

        Only the job that owns an output writes it, and Snakemake lets one run at a time work
        in a directory, so every such file of this output is a leftover.
        """
        found = []
        for folder in (self.path.parent, self.sidecar.parent, self.cached.parent):
            found += folder.glob(f".{self.path.name}.*.tmp")
            found += folder.glob(f".{self.sidecar.name}.*.tmp")
        for path in found:
            path.unlink(missing_ok=True)
            log.info("removed %s, left by an interrupted write", path)
        return found


def _checksum_file(cached: Path) -> Path:
    return cached.with_name(cached.name + ".state.json")


def _state(recorded: Any) -> FileState:
    return FileState(**recorded) if isinstance(recorded, dict) else FileState("", -1, -1)
