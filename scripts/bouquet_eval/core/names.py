"""Names and text from outside: safe folder names, and text shown on a terminal.

A name read from a file that someone else made (a judged system of a judgement table or of
Met-BOUQuET, a received submission's model) is data. It never becomes a path, a pattern or a
job name itself: it is mapped once (`FolderNames`) to a folder name of letters, digits, `.`,
`_` and `-` that no other name of the same set maps to, and that name is used for every file,
log, benchmark and job; the original is kept as data only (tables, pages, records of the
mapping). Text from outside that is printed (a member's name, a column of a claim) goes
through `shown`, so that no control character or escape sequence reaches a terminal.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

MAX_FOLDER_NAME = 80
"""The longest folder name made: room for the suffixes of the files made from it (`.benchmark
.tsv`, a shard) within the 255 bytes a file name may have, and short enough to read."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DIGEST = 8
# Control characters, and the line and paragraph separators that split a line where Python's
# str.splitlines reads it.
_LINE_BREAKING = ("Cc", "Zl", "Zp")


class UnsafeName(ValueError):
    """A name from outside that cannot name a folder; the message says why."""


def refusal(name: object) -> str | None:
    """Why `name` cannot be mapped to a folder name, None where it can: it is not text, is
    empty, or holds a control character (NUL, a line break, an escape sequence) or a line
    separator, which no line of a log, table or MTME file could hold as it is."""
    if not isinstance(name, str):
        return f"is {type(name).__name__}, not text"
    if not name.strip():
        return "is empty"
    for character in name:
        if unicodedata.category(character) in _LINE_BREAKING:
            return f"holds the control character U+{ord(character):04X}"
    return None


def folder_name(name: str) -> str:
    """The folder name `name` maps to: every run of other characters becomes `_`, and
    leading `.`, `-` and `_` and trailing `.` go (no hidden file, no option, no `..`). A name
    with no letter or digit left, or longer than MAX_FOLDER_NAME, keeps what fits and a digest
    of the whole, so that it still says which name it stands for. UnsafeName where `refusal`
    finds a reason."""
    reason = refusal(name)
    if reason is not None:
        raise UnsafeName(f"{shown(name)} {reason}")
    safe = _UNSAFE.sub("_", name).lstrip("._-").rstrip(".")
    if safe.strip("_") and len(safe) <= MAX_FOLDER_NAME:
        return safe
    digest = hashlib.sha256(name.encode("utf-8", errors="surrogatepass")).hexdigest()[:_DIGEST]
    kept = safe[: MAX_FOLDER_NAME - _DIGEST - 1].rstrip("._-") if safe.strip("_") else ""
    return f"{kept}-{digest}" if kept else f"name-{digest}"


@dataclass
class FolderNames:
    """The folder names of one set of names (a table's judged systems, the received
    submissions): each name mapped once, two names that map to one folder name refused.
    Folder names that differ only in case collide too: they would share a folder where the
    file system ignores case."""

    what: str
    """What the names are, for messages: "judged system", "submission's model"."""
    by_name: dict[str, str] = field(default_factory=dict)
    _names: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Folder name (case-folded) -> the name that took it and where it was read."""

    def add(self, name: object, where: str) -> str:
        """The folder name of `name`, read at `where` (a file and row); UnsafeName naming
        `where` and the value when it cannot be mapped or takes another name's folder."""
        if isinstance(name, str) and name in self.by_name:
            return self.by_name[name]
        try:
            folder = folder_name(name)  # type: ignore[arg-type]  # refusal() names a non-str
        except UnsafeName as error:
            raise UnsafeName(f"{where}: {self.what} {error}: it cannot name a folder") from None
        assert isinstance(name, str)
        taken = self._names.get(folder.casefold())
        if taken is not None:
            other, other_where = taken
            same = self.by_name[other]
            folders = (
                f"the folder name '{folder}'"
                if same == folder
                else f"the folder names '{same}' and '{folder}', one folder where case is ignored"
            )
            raise UnsafeName(
                f"{where}: {self.what} {shown(name)} and {shown(other)} ({other_where}) both map "
                f"to {folders}: rename one"
            )
        self._names[folder.casefold()] = (name, where)
        self.by_name[name] = folder
        return folder


_SHOWN_LENGTH = 120


def shown(text: object, limit: int = _SHOWN_LENGTH, *, quoted: bool = True) -> str:
    """`text` for a terminal or a log, in quotes unless not `quoted`: control and invisible
    formatting characters (line breaks, escape sequences, direction overrides) written as
    escapes, and cut to `limit` characters with the count of those left out."""
    value = str(text)
    cut = value[:limit]
    escaped = "".join(
        character if character.isprintable() else _escape(character) for character in cut
    )
    rest = f"... ({len(value) - limit} more characters)" if len(value) > limit else ""
    if not quoted:
        return f"{escaped}{rest}"
    return f"'{escaped.replace(chr(39), chr(92) + chr(39))}'{rest}"


_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(character: str) -> str:
    code = ord(character)
    if character in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[character]
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
