"""Provenance of per-direction outputs: settings digests, secret redaction, resumable writes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from bouquet_eval.io import file_sha256, write_atomically, write_json

REDACTED = "<redacted>"
# The workflow records its command line here, since rule jobs run in other processes.
COMMAND_ENVIRONMENT_VARIABLE = "BOUQUET_EVAL_COMMAND"
_SECRET_KEY = re.compile(r"api[_-]?key|token|secret|passw|authorization|credential", re.IGNORECASE)


def redact(value: Any) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced.

    Keys ending in `_env` name an environment variable rather than hold a secret, and are kept.
    """
    if isinstance(value, dict):
        return {
            key: REDACTED
            if _SECRET_KEY.search(str(key)) and not str(key).endswith("_env")
            else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value


def settings_digest(settings: Any) -> str:
    canonical = json.dumps(settings, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class ResumableOutput:
    """A per-direction output file that is recomputed only when what produces it changes.

    Beside `path` live two things Snakemake does not know about and so never deletes:
    - `.provenance/<name>.json`: the digest of the settings that produced the file and the
      file's sha256; the file is current only when both match;
    - `.cache/<digest>/<name>`: a copy written as soon as the direction is done, so that work
      survives when the job that did it fails later and Snakemake removes its new outputs.
    `settings` must already be redacted: it is written to the sidecar.
    """

    path: Path
    settings: dict[str, Any]

    @cached_property
    def digest(self) -> str:
        return settings_digest(self.settings)

    @property
    def sidecar(self) -> Path:
        return self.path.parent / ".provenance" / f"{self.path.name}.json"

    @property
    def cached(self) -> Path:
        return self.path.parent / ".cache" / self.digest[:16] / self.path.name

    def is_current(self) -> bool:
        if not (self.path.is_file() and self.sidecar.is_file()):
            return False
        try:
            record = json.loads(self.sidecar.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return False
        return record.get("digest") == self.digest and record.get("sha256") == file_sha256(
            self.path
        )

    def restore_from_cache(self) -> bool:
        if not self.cached.is_file():
            return False
        self._publish_cached()
        return True

    def publish(self, write: Callable[[Path], None]) -> None:
        """Write the output through `write(path)`: into the cache first, then in place."""
        write_atomically(self.cached, write)
        self._publish_cached()

    def _publish_cached(self) -> None:
        write_atomically(self.path, lambda temporary: shutil.copyfile(self.cached, temporary))
        record = {
            "digest": self.digest,
            "sha256": file_sha256(self.path),
            "settings": self.settings,
        }
        write_json(self.sidecar, record)


# `key=value` or `"key": "value"` where the key looks like it holds a secret.
_SECRET_ASSIGNMENT = re.compile(
    r"""((?:api[_-]?key|token|secret|passw\w*|authorization|credential)\w*["']?\s*[:=]\s*["']?)"""
    r"""[^"',}\s]+""",
    re.IGNORECASE,
)


def redact_command(argv: list[str]) -> list[str]:
    """The command line with values given to secret-looking keys replaced."""
    return [_SECRET_ASSIGNMENT.sub(rf"\g<1>{REDACTED}", argument) for argument in argv]
