"""Everything from outside is data: names in judgement tables and submissions never become
paths, and received archives are read within limits.

Most hostile cases are checked here on the functions that read and check (each one timed and
its memory traced); test_metaeval.py and test_results.py run representative ones through
`snakemake metaeval` and `snakemake verify`.
"""

from __future__ import annotations

import json
import random
import re
import tarfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.core.names import MAX_FOLDER_NAME, FolderNames, UnsafeName, folder_name, shown
from bouquet_eval.data.judgements import JudgementError, JudgementSource, judged_systems
from bouquet_eval.data.received import (
    ArchiveLimits,
    ReceivedSubmission,
    SubmissionError,
    receive,
)
from bouquet_eval.data.translations import read_translations

from .conftest import SAMPLE
from .hostile_archives import (
    GIB,
    MIB,
    Zeros,
    folder_members,
    member,
    sparse,
    tiny_files,
    write_archive,
)
from .sample_forms import DEFAULT_COLUMNS, judgements_by
from .workflow_configs import SAMPLE_DIRECTIONS

SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
SECONDS, MEMORY = 60, GIB
"""What every hostile case may cost at most."""


def within_bounds(action: Callable[[], object]) -> object:
    """`action()` (or the exception it raised), checked to take under SECONDS and to
    allocate under MEMORY at its peak."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        result: object = action()
    except Exception as error:
        result = error
    finally:
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < SECONDS, f"{elapsed:.1f} s"
    assert peak < MEMORY, f"{peak / MIB:.0f} MiB"
    return result


def one_line(message: str) -> None:
    """A refusal is one line, with nothing a terminal would act on."""
    assert not re.search(r"[\x00-\x1f\x7f\u2028\u2029]", message), repr(message)


# --- Names -----------------------------------------------------------------------------------

HOSTILE_NAMES = {
    "absolute": "/tmp/project/requirements",
    "climbing": "../../../outside/escaped",
    "slash": "team/model",
    "backslash": "C:\\models\\mine",
    "angle": "<b>",
    "braces": "poor{x}",
    "long": "x" * 300,
    "dots": "..",
    "option": "-rf",
    "hidden": ".profile",
    "script": "中文系统",
    "spaces": "my model v2",
}
REFUSED_NAMES = {
    "nul": ("a\x00b", "U+0000"),
    "escape": ("\x1b]0;pwned\x07", "U+001B"),
    "line break": ("evil\r\nbouquet-eval: every claimed value reproduced", "U+000D"),
    "separator": ("a\u2028b", "U+2028"),
    "empty": ("  ", "is empty"),
}


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_a_name_from_outside_maps_to_a_folder_name_inside(tmp_path: Path, name: str) -> None:
    folder = folder_name(name)
    assert SAFE.fullmatch(folder) and len(folder) <= MAX_FOLDER_NAME
    assert (tmp_path / folder).resolve().parent == tmp_path.resolve()
    assert folder_name(name) == folder  # the same in every process


@pytest.mark.parametrize(("name", "reason"), REFUSED_NAMES.values(), ids=REFUSED_NAMES.keys())
def test_a_name_that_cannot_be_mapped_is_refused(name: str, reason: str) -> None:
    with pytest.raises(UnsafeName, match=re.escape(reason)) as refused:
        FolderNames("judged system").add(name, "judged.csv, row 3")
    assert str(refused.value).startswith("judged.csv, row 3: judged system '")
    one_line(str(refused.value))


def test_random_names_map_to_safe_unique_folder_names() -> None:
    generator = random.Random(42)
    alphabet = "aZ9._-/\\<>{}:*?|\"' \t~$`ü中\u202e\ufeff"
    names = FolderNames("name")
    for _ in range(3000):
        name = "".join(generator.choice(alphabet) for _ in range(generator.randint(1, 320)))
        try:
            folder = names.add(name, "here")
        except UnsafeName as error:
            one_line(str(error))
            assert re.search("both map to|control character|is empty", str(error))
            continue
        assert SAFE.fullmatch(folder) and len(folder) <= MAX_FOLDER_NAME and folder != ".."


def test_two_names_that_map_alike_are_refused_naming_both() -> None:
    names = FolderNames("judged system")
    assert names.add("team/model", "t.csv, row 2") == "team_model"
    with pytest.raises(UnsafeName) as refused:
        names.add("team model", "t.csv, row 9")
    assert str(refused.value) == (
        "t.csv, row 9: judged system 'team model' and 'team/model' (t.csv, row 2) both map to "
        "the folder name 'team_model': rename one"
    )
    names.add("Model", "t.csv, row 10")
    with pytest.raises(UnsafeName, match="'Model' and 'model', one folder where case is ignored"):
        names.add("model", "t.csv, row 11")


def test_shown_text_carries_no_control_character() -> None:
    text = "x\r\nbouquet-eval: ok\x1b]0;title\x07\u202e" + "y" * 200
    displayed = shown(text)
    one_line(displayed)
    assert displayed.startswith("'x\\r\\nbouquet-eval: ok\\x1b]0;title\\x07\\u202e")
    assert displayed.endswith("... (110 more characters)")


def hostile_table(path: Path, names: Sequence[str]) -> JudgementSource:
    """The sample's judgements, each of `names` a system of its own."""
    judgements_by(names).to_csv(path, index=False)
    return JudgementSource((path,), DEFAULT_COLUMNS, True, {"path": str(path)})


def test_judged_systems_from_a_hostile_table_get_folders_inside(tmp_path: Path) -> None:
    source = hostile_table(tmp_path / "judged.csv", list(HOSTILE_NAMES.values()))
    systems = judged_systems(source, SAMPLE_DIRECTIONS, tmp_path / "runs")
    assert sorted(systems) == sorted(HOSTILE_NAMES.values())
    root = (tmp_path / "runs" / "metaeval" / "systems").resolve()
    for name, system in systems.items():
        assert system.name == name and system.folder.resolve().parent == root
        assert system.folder.name == system.folder_name == folder_name(name)
    # A job's process, which reads three columns unchecked, names the same folders.
    assert judged_systems(source, SAMPLE_DIRECTIONS, tmp_path / "runs", check=False) == systems


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["good", "a\x00b"],
            r"judged.csv, row 49, field system \(column 'system'\): 'a\\x00b' holds the control "
            r"character U\+0000: a judged system's name names files$",
        ),
        (
            ["good", "\x1b]0;x\x07"],
            r"row 49, field system \(column 'system'\): '\\x1b\]0;x\\x07' holds the control",
        ),
        (
            ["team/model", "good", "team model"],
            r"judged.csv, row 97, field system: judged system 'team model' and 'team/model' "
            r"\(judgements file .*judged.csv, row 1, field system\) both map to the folder "
            r"name 'team_model': rename one$",
        ),
    ],
    ids=["nul", "escape", "alike"],
)
def test_a_system_that_cannot_name_a_folder_stops_the_check(
    tmp_path: Path, names: list[str], message: str
) -> None:
    source = hostile_table(tmp_path / "judged.csv", names)
    with pytest.raises(JudgementError) as refused:
        judged_systems(source, SAMPLE_DIRECTIONS, tmp_path / "runs")
    assert re.search(message, str(refused.value)), str(refused.value)
    one_line(str(refused.value))


# --- Received archives -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A submission's folder as `snakemake submission` lays it out: the sample's directions
    translated by copying the source, and a claim (its values are not checked here)."""
    folder = tmp_path_factory.mktemp("honest") / "copy-source"
    folder.mkdir()
    rows = []
    for direction in SAMPLE_DIRECTIONS:
        sentences = pd.read_parquet(SAMPLE / f"{direction}.parquet")
        lines = [
            json.dumps(
                {
                    "src_lang": s.src_lang,
                    "tgt_lang": s.tgt_lang,
                    "src_text": s.src_text,
                    "ref_text": s.tgt_text,
                    "mt_text": s.src_text,
                    "uniq_id": s.uniq_id,
                },
                ensure_ascii=False,
            )
            for s in sentences.itertuples()
        ]
        (folder / f"{direction}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        rows.append([direction.src_lang, direction.tgt_lang, len(lines), 12.5, 11.0, 14.0, 12.4])
    header = "src_lang,tgt_lang,n_sentences,chrfpp,chrfpp_ci_low,chrfpp_ci_high,chrfpp_corpus"
    (folder / "scores.csv").write_text(
        header + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows), encoding="utf-8"
    )
    (folder / "manifest.json").write_text("{}\n", encoding="utf-8")
    return folder


CLAIM = "copy-source/scores.csv"
FRA = "copy-source/eng_Latn-fra_Latn.jsonl"


def replaced(honest: Path, name: str, content: bytes | Zeros) -> list:
    """The honest members, `name`'s content replaced (or added)."""
    members = [m for m in folder_members(honest, "copy-source") if m[0].name != name]
    return [*members, member(name, content)]


def claim_edited(honest: Path, edit: Callable[[str], str]) -> list:
    text = (honest / "scores.csv").read_text(encoding="utf-8")
    return replaced(honest, CLAIM, edit(text).encode("utf-8"))


def many_members(honest: Path, count: int) -> list:
    names = (f"copy-source/extra/{number}.txt" for number in range(count))
    return [*folder_members(honest, "copy-source"), *tiny_files(names)]


def escape_named(honest: Path) -> list:
    return [
        *folder_members(honest, "copy-source"),
        member("copy-source/\x1b]0;pwned\x07.txt", b"x"),
        member("copy-source/x\r\nbouquet-eval: every claimed value reproduced", b"x"),
    ]


# Each hostile archive, and the refusal it gets (None: it is read, as data).
ARCHIVES: dict[str, tuple[Callable[[Path], list], str | None]] = {
    "claim bomb": (
        lambda h: replaced(h, CLAIM, Zeros(GIB, b"\n")),
        r", member 'copy-source/scores.csv': 1.0 GiB unpacked, over the limit of 64.0 MiB a "
        r"file \(verify.limits.member_mib\); refused$",
    ),
    "translation bomb": (
        lambda h: replaced(h, FRA, Zeros(GIB)),
        r"member 'copy-source/eng_Latn-fra_Latn.jsonl': 1.0 GiB unpacked, over the limit",
    ),
    "ignored file bomb": (
        lambda h: replaced(h, "copy-source/config.yaml", Zeros(GIB)),
        r"member 'copy-source/config.yaml': 1.0 GiB unpacked, over the limit",
    ),
    "sparse bomb": (
        lambda h: [*folder_members(h, "copy-source"), sparse("copy-source/x.jsonl", 4 * GIB)],
        r"member 'copy-source/x.jsonl': 4.0 GiB unpacked, over the limit",
    ),
    "extended header bomb": (
        lambda h: [
            *folder_members(h, "copy-source"),
            member("././@PaxHeader", Zeros(GIB), kind=tarfile.XHDTYPE),
        ],
        r", before member '././@PaxHeader': an extended header of 1.0 GiB, over 1.0 MiB",
    ),
    "long name bomb": (
        lambda h: [
            *folder_members(h, "copy-source"),
            member("././@LongLink", Zeros(GIB), kind=tarfile.GNUTYPE_LONGNAME),
        ],
        r"an extended header of 1.0 GiB, over 1.0 MiB",
    ),
    "100,000 members": (
        lambda h: many_members(h, 100_000),
        r", member 'copy-source/extra/\d+.txt': more than 5000 members, the limit "
        r"\(verify.limits.members\); refused$",
    ),
    "claim rows": (
        lambda h: claim_edited(h, lambda text: text + "\n" * 10_001),
        r"member 'copy-source/scores.csv', line 10002: more than 10000 rows, the limit "
        r"\(verify.limits.claim_rows\); refused$",
    ),
    "direction claimed twice": (
        lambda h: claim_edited(h, lambda text: text + text.splitlines()[3] + "\n"),
        r"member 'copy-source/scores.csv', line 22: direction \S+ is claimed twice \(also at "
        r"line 4\); refused$",
    ),
    "links": (
        lambda h: [
            *(m for m in folder_members(h, "copy-source") if m[0].name != FRA),
            member(FRA, kind=tarfile.SYMTYPE, linkname="/etc/passwd"),
            member("copy-source/eng_Latn-deu_Latn.jsonl.x", kind=tarfile.LNKTYPE, linkname=FRA),
        ],
        None,
    ),
    "byte-order mark": (lambda h: claim_edited(h, lambda text: "\ufeff" + text), None),
    "CRLF": (lambda h: claim_edited(h, lambda text: text.replace("\n", "\r\n")), None),
    "terminal escapes in names": (escape_named, None),
    "escape in the model's name": (
        lambda h: folder_members(h, "\x1b]0;pwned\x07"),
        r"the model's name \(its top folder's\) '\\x1b\]0;pwned\\x07' holds the control "
        r"character U\+001B: it cannot name a folder; refused$",
    ),
    "two folders": (
        lambda h: [*folder_members(h, "copy-source"), member("other/scores.csv", b"x")],
        r", member 'other/scores.csv': it is not one folder: it holds 'copy-source' and "
        r"'other'; refused$",
    ),
    "absolute member": (
        lambda h: [member("/etc/cron.d/x", b"x"), *folder_members(h, "copy-source")],
        r", member 'copy-source': it is not one folder: it holds '' and 'copy-source'; refused$",
    ),
    "a word for a score": (
        lambda h: claim_edited(h, lambda text: text.replace("12.5", "excellent", 1)),
        r"member 'copy-source/scores.csv', line 2, column chrfpp: 'excellent' is not a "
        r"number; refused$",
    ),
    "not UTF-8": (
        lambda h: replaced(h, CLAIM, (h / "scores.csv").read_bytes() + b"eng_Latn,\xff\xfe\n"),
        r"member 'copy-source/scores.csv', line 22: not UTF-8 text \(byte 0xff\); refused$",
    ),
    "escape in a column": (
        lambda h: claim_edited(h, lambda text: text.replace("chrfpp_corpus", "x\x1b[2J", 1)),
        r"line 1: the header's column 'x\\x1b\[2J' holds the control character U\+001B",
    ),
    "a column twice": (
        lambda h: claim_edited(h, lambda text: text.replace("chrfpp_corpus", "chrfpp", 1)),
        r"line 1: the header names 'chrfpp' twice; refused$",
    ),
    "fields missing": (
        lambda h: claim_edited(h, lambda text: text.replace(",12.4\n", "\n", 1)),
        r"line 2: 6 fields where the header has 7; refused$",
    ),
}


def test_limits_default_to_the_documented_values() -> None:
    assert ArchiveLimits() == ArchiveLimits(
        members=5000, member_bytes=64 * MIB, total_bytes=2048 * MIB, claim_rows=10000
    )


@pytest.mark.parametrize("case", ARCHIVES, ids=list(ARCHIVES))
def test_a_hostile_archive_is_refused_in_moments_or_read_as_data(
    honest: Path, tmp_path: Path, case: str
) -> None:
    build, refusal = ARCHIVES[case]
    archive = write_archive(tmp_path / "copy-source.tar.gz", build(honest))
    received = within_bounds(lambda: receive(archive, SAMPLE_DIRECTIONS, "submissions[0]"))
    if refusal is None:
        assert isinstance(received, ReceivedSubmission), received
        assert received.directions == tuple(SAMPLE_DIRECTIONS)
        for notice in received.notices():
            one_line(notice)
        return
    assert isinstance(received, SubmissionError), received
    message = str(received)
    assert message.startswith(f"submission '{archive}'")
    assert re.search(refusal, message), message
    one_line(message)
    assert tmp_path.iterdir() and sorted(tmp_path.iterdir()) == [archive]  # nothing written


def test_the_total_unpacked_size_is_bounded(honest: Path, tmp_path: Path) -> None:
    limits = ArchiveLimits(member_bytes=16 * MIB, total_bytes=40 * MIB)
    members = folder_members(honest, "copy-source") + [
        member(f"copy-source/part{number}.bin", Zeros(15 * MIB)) for number in range(4)
    ]
    archive = write_archive(tmp_path / "copy-source.tar.gz", members)
    with pytest.raises(SubmissionError) as refused:
        receive(archive, SAMPLE_DIRECTIONS, "submissions[0]", limits)
    assert re.search(
        r"member 'copy-source/part2.bin': its members reach 45.\d MiB unpacked here, over the "
        r"limit of 40.0 MiB \(verify.limits.total_mib\)",
        str(refused.value),
    )


def test_a_folder_is_held_to_the_same_limits(honest: Path, tmp_path: Path) -> None:
    folder = tmp_path / "copy-source"
    folder.mkdir()
    for path in honest.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "huge.bin").write_bytes(bytes(3 * MIB))
    limits = ArchiveLimits(member_bytes=2 * MIB)
    with pytest.raises(SubmissionError, match=r"member 'huge.bin': 3.0 MiB unpacked, over"):
        receive(folder, SAMPLE_DIRECTIONS, "submissions[0]", limits)


def test_escaped_names_are_listed_in_one_line_each(honest: Path, tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "copy-source.tar.gz", escape_named(honest))
    received = receive(archive, SAMPLE_DIRECTIONS, "submissions[0]")
    (notice,) = received.notices()
    assert "'\\x1b]0;pwned\\x07.txt'" in notice
    assert "'x\\r\\nbouquet-eval: every claimed value reproduced'" in notice


def test_many_files_not_read_make_one_notice(honest: Path, tmp_path: Path) -> None:
    members = folder_members(honest, "copy-source") + [
        member(f"copy-source/note{number:03d}.txt", b"x") for number in range(300)
    ]
    received = receive(write_archive(tmp_path / "c.tar.gz", members), SAMPLE_DIRECTIONS, "k")
    (notice,) = received.notices()
    assert notice.count(".txt', ") + notice.count(".json', ") == 9  # and the 10th:
    assert "'note008.txt' and 291 more not read" in notice


def test_unpacking_writes_only_the_files_read_under_names_made_here(
    honest: Path, tmp_path: Path
) -> None:
    members = [
        *folder_members(honest, "copy-source"),
        member("copy-source/../escaped.jsonl", b"x"),
        member("copy-source/nested/eng_Latn-fra_Latn.jsonl", b"x"),
    ]
    archive = write_archive(tmp_path / "copy-source.tar.gz", members)
    received = receive(archive, SAMPLE_DIRECTIONS, "submissions[0]")
    unpacked = tmp_path / "unpacked"
    received.unpack(unpacked, SAMPLE_DIRECTIONS)
    expected = {"scores.csv", *(f"{d}.jsonl" for d in SAMPLE_DIRECTIONS)}
    assert {path.name for path in unpacked.iterdir()} == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy-source.tar.gz", "unpacked"]
    # Read by the jobs' processes: the name alone, from the first header.
    named = receive(archive, [], "submissions[0]", check=False)
    assert (named.name, named.folder_name, named.directions) == ("copy-source", "copy-source", ())


def test_translations_with_a_byte_order_mark_crlf_or_worse(honest: Path, tmp_path: Path) -> None:
    direction = SAMPLE_DIRECTIONS[0]
    rows = pd.read_parquet(SAMPLE / f"{direction}.parquet")
    text = (honest / f"{direction}.jsonl").read_text(encoding="utf-8")
    path = tmp_path / f"{direction}.jsonl"
    path.write_text("\ufeff" + text.replace("\n", "\r\n"), encoding="utf-8", newline="")
    assert len(read_translations(path, direction, rows)) == len(rows)
    lines = text.splitlines()
    for line, content, reason in (
        (2, b"[" * 100_000 + b"]" * 100_000, "line 2: not a translation (nested too deeply)"),
        (3, b'{"mt_text": "\xff"}', "line 3: not UTF-8 text"),
    ):
        edited = [raw.encode("utf-8") for raw in lines]
        edited[line - 1] = content
        path.write_bytes(b"\n".join(edited) + b"\n")
        with pytest.raises(ValueError) as refused:
            read_translations(path, direction, rows, label="submission 's', member 'm'")
        assert str(refused.value) == f"submission 's', member 'm', {reason}"
