"""Archives as a hostile sender makes them, written in moments whatever they unpack to.

A .tar.gz is a tar stream compressed with gzip, and gzip may be several members one after
another, which readers unpack as one stream. So a member of a GiB of zeros is written as its
header, then one compressed MiB of zeros repeated, then its padding: the archive is what
`tarfile` would write (the same tar stream once unpacked), a few MiB on disk, built in well
under a second.
"""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
GIB = 1 << 30
_ZEROS = gzip.compress(bytes(MIB), compresslevel=9)


@dataclass(frozen=True)
class Zeros:
    """Content of `size` zero bytes (or newlines), never held in memory."""

    size: int
    byte: bytes = b"\0"


def member(
    name: str,
    content: bytes | Zeros = b"",
    kind: bytes = tarfile.REGTYPE,
    linkname: str = "",
) -> tuple[tarfile.TarInfo, bytes | Zeros]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.size = content.size if isinstance(content, Zeros) else len(content)
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info, content


def sparse(name: str, expands_to: int) -> tuple[tarfile.TarInfo, bytes | Zeros]:
    """A GNU sparse member: no data stored, `expands_to` bytes of zeros once unpacked."""
    info, content = member(name)
    info.type = tarfile.GNUTYPE_SPARSE
    return _SparseInfo(info, expands_to), content


class _SparseInfo(tarfile.TarInfo):
    def __init__(self, info: tarfile.TarInfo, real_size: int) -> None:
        super().__init__(info.name)
        self.type, self.size, self.mode = info.type, info.size, info.mode
        self.real_size = real_size

    def tobuf(self, *arguments: object, **keywords: object) -> bytes:
        header = bytearray(super().tobuf(tarfile.GNU_FORMAT))
        # The old GNU header's real size (offset 483, 12 bytes), then its checksum again.
        header[483:495] = b"%011o\0" % self.real_size
        header[148:156] = b" " * 8
        checksum = sum(header[:512])
        header[148:156] = b"%06o\0 " % checksum
        return bytes(header)


def write_archive(path: Path, members: Iterable[tuple[tarfile.TarInfo, bytes | Zeros]]) -> Path:
    """`members` as a .tar.gz (GNU format, as tarfile writes by default)."""
    pending = bytearray()
    with open(path, "wb") as out:

        def flush() -> None:
            if pending:
                out.write(gzip.compress(bytes(pending), compresslevel=6))
                pending.clear()

        for info, content in members:
            pending += info.tobuf(tarfile.GNU_FORMAT)
            if isinstance(content, Zeros):
                flush()
                whole, rest = divmod(content.size, MIB)
                block = _ZEROS if content.byte == b"\0" else gzip.compress(content.byte * MIB, 9)
                for _ in range(whole):
                    out.write(block)
                pending += content.byte * rest
            else:
                pending += content
            pending += bytes(-info.size % 512)
            if len(pending) > MIB:
                flush()
        pending += bytes(1024)
        flush()
    return path


def tiny_files(names: Iterable[str]) -> Iterable[tuple[tarfile.TarInfo, bytes | Zeros]]:
    """A file of one byte per name, its header made by hand: tarfile takes a second for 10,000
    of them, and a test may want a hundred thousand."""
    template = bytearray(member("x", b"x")[0].tobuf(tarfile.GNU_FORMAT))
    template[148:156] = b" " * 8
    base = sum(template) - sum(template[:100])
    for name in names:
        encoded = name.encode("utf-8")[:100]
        header = bytearray(template)
        header[:100] = encoded.ljust(100, b"\0")
        header[148:156] = b"%06o\0 " % (base + sum(encoded))
        yield _Raw(bytes(header)), b"x"


class _Raw(tarfile.TarInfo):
    """A header written beforehand."""

    def __init__(self, header: bytes) -> None:
        super().__init__()
        self.header = header
        self.size = 1

    def tobuf(self, *arguments: object, **keywords: object) -> bytes:
        return self.header


def folder_members(folder: Path, top: str) -> list[tuple[tarfile.TarInfo, bytes | Zeros]]:
    """The files of a folder as members of `top`/, the top folder first."""
    return [member(top, kind=tarfile.DIRTYPE)] + [
        member(f"{top}/{path.name}", path.read_bytes()) for path in sorted(folder.iterdir())
    ]
