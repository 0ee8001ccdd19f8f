"""Text nobody here wrote, on every page a run makes: payloads that would run a script, blank a
page or break its data if a page took them for markup, written into every text field a page can
show (the dataset's texts, ids, domains and registers; models' outputs; a judgement table's
texts, system names and column names; the configuration's strings, translator settings
included). One real run of the workflow carries them all; every page of its results folder,
report.html and `bouquet-eval browse` are then opened in Chromium and in Firefox.

Also here: the one function that puts data into a page's script, the browser's headers, and
the tie between the pages the results code writes and the outputs the report declares.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from bouquet_eval.results.pages import run_page
from bouquet_eval.results.rendering import ABRIDGED_CHARACTERS, ASSETS, PAGE_BYTES, script_json

from . import browser
from .chat_server import ChatServer
from .conftest import SAMPLE, Workflow, patience
from .test_results_views import browse_command
from .workflow_configs import SMALL_JOBS

# --- The one way data enters a page's script ----------------------------------------------


def test_script_json_is_inert_in_every_parser_state_and_reads_back() -> None:
    data = {
        "a</script><script>": ["<!--<script>", "-->", "&amp;", "\u2028\u2029", "\ud800"],
        "n": [1.5, None, True],
    }
    text = str(script_json(data))
    for unsafe in ("<", ">", "&", "\u2028", "\u2029", "\ud800"):
        assert unsafe not in text
    text.encode("utf-8")  # every character encodable: nothing unpaired left
    # JSON.parse reads the escapes back; so does Python's parser.
    assert json.loads(text) == data
    with pytest.raises(ValueError):  # JSON has no NaN; JSON.parse would refuse the page
        script_json({"x": float("nan")})


def test_an_unpaired_surrogate_a_page_shows_becomes_a_replacement_character() -> None:
    """A lone surrogate is not text in any file a run reads but YAML and JSON, and a
    configuration string holding one is refused before any job (tests/test_config.py): a run
    cannot carry one to its pages. Should one reach a page, it shows as U+FFFD."""
    page = run_page({}, {"m": {"entries": [{"note": "a \ud800 b"}]}})
    assert "a \ufffd b" in page
    page.encode("utf-8")


def test_the_packages_own_scripts_and_styles_cannot_end_their_element_early() -> None:
    for path in ASSETS.rglob("*"):
        if path.suffix in (".js", ".css"):
            text = path.read_text(encoding="utf-8").lower()
            for sequence in ("</script", "<!--", "<script", "</style"):
                assert sequence not in text, (path.name, sequence)


def test_a_run_page_too_large_for_the_report_cuts_its_long_strings_and_says_so() -> None:
    long = "x" * 1_000_000
    config = {"resources": {"translate": {"slurm_extra": long}}, "models": []}
    manifests = {"m": {"entries": [{"config": {**config, "models": []}, "note": long}]}}
    page = run_page(config, manifests)
    assert len(page.encode("utf-8")) <= PAGE_BYTES
    assert "strings too long for the report" in page and "2,000 characters here" in page
    assert f"{'x' * 2000}… (998,000 more characters)" in page
    # The model's configuration is the run's: not shown twice.
    assert page.count("(998,000 more characters)") == 2
    assert "(the configuration above, with this model&#39;s entry alone in models)" in page


# --- Payloads -------------------------------------------------------------------------------

PWNED = "PWNED"


class Beacon(ThreadingHTTPServer):
    """Records every request: a payload that runs calls home here."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.calls.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_POST = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def script(self) -> str:
        """What each payload runs if it runs: a changed title, a flag, a request home."""
        url = f"http://127.0.0.1:{self.server_port}/beacon"
        return f"document.title='{PWNED}';window.pwned=1;navigator.sendBeacon('{url}')"


def payloads(run: str) -> dict[str, str]:
    """Each payload by name; `run` is the script a payload runs."""
    long_line = ("<!--<script>" + "é" * 988 + "</script>") * 100  # one line of 100 kB
    return {
        "comment-script": "<!--<script>",
        "end-script": f"</script><script>{run}</script>",
        "script-in-comment": f"<!-- <script>{run}</script> -->",
        "svg-onload": f'<svg onload="{run}">',
        "img-onerror": f'<img src=x onerror="{run}">',
        "javascript-url": f"javascript:{run}",
        "separators": "line\u2028separator\u2029paragraph",
        "long-line": long_line,
    }


DIRECTIONS = [
    "eng_Latn-fra_Latn",
    "fra_Latn-eng_Latn",
    "arb_Arab-fra_Latn",
    "eng_Latn-deu_Latn",
    "deu_Latn-eng_Latn",
    "eng_Latn-spa_Latn",
    "cmn_Hans-hin_Deva",
    "hin_Deva-eng_Latn",
]
SENTENCES = 3
JUDGED = DIRECTIONS[:2]


@dataclass
class HostileRun:
    workdir: Path
    output: Path
    payloads: dict[str, str]
    by_direction: dict[str, str]  # direction -> the name of the payload its texts carry
    written: dict[str, Any]  # setting path -> value, as written in the configuration
    beacon: Beacon
    config: dict[str, Any]


def hostile_dataset(folder: Path, payload_of: dict[str, str]) -> None:
    """The sample's first sentences of each direction, every text field carrying its
    direction's payload, a `register` column beside `domain`."""
    folder.mkdir(parents=True)
    for direction, payload in payload_of.items():
        rows = pd.read_parquet(SAMPLE / f"{direction}.parquet").head(SENTENCES)
        numbers = range(len(rows))
        rows["src_text"] = [f"source {n} {payload} {t}" for n, t in enumerate(rows["src_text"])]
        rows["tgt_text"] = [f"reference {n} {payload}" for n in numbers]
        rows["uniq_id"] = [f"s{n} {payload}" for n in numbers]
        rows["domain"] = [f"domain {n % 2} {payload}" for n in numbers]
        rows["register"] = f"register {payload}"
        rows.to_parquet(folder / f"{direction}.parquet", index=False)


def provided_translations(folder: Path, dataset: Path, payload_of: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for direction, payload in payload_of.items():
        rows = pd.read_parquet(dataset / f"{direction}.parquet")
        lines = [
            {
                "src_lang": row.src_lang,
                "tgt_lang": row.tgt_lang,
                "src_text": row.src_text,
                "mt_text": f"provided {n} {payload}",
                "uniq_id": row.uniq_id,
            }
            for n, row in enumerate(rows.itertuples())
        ]
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        (folder / f"{direction}.jsonl").write_text(text, encoding="utf-8")


SYSTEM_COLUMN = "system <svg onload=x>"
# Judged systems, named by payloads (their folders, logs and jobs by safe names made from
# them); not by the line separators, which a judged system's name is refused for holding
# (tests/test_outside_inputs.py): they are in the judged texts.
SYSTEMS = ["javascript-url", "svg-onload"]


def judgements(path: Path, dataset: Path, names: list[str], hostile: dict[str, str]) -> None:
    """Two judged systems named by payloads, in two directions, their texts carrying
    payloads; the column of system names named by one too."""
    rows = []
    for direction in JUDGED:
        sentences = pd.read_parquet(dataset / f"{direction}.parquet")
        for position, sentence in enumerate(sentences.itertuples()):
            for quality, name in enumerate(names):
                rows.append(
                    {
                        "src_lang": sentence.src_lang,
                        "tgt_lang": sentence.tgt_lang,
                        "src_text": sentence.src_text,
                        "mt_text": f"judged {hostile[name]} {hostile['separators']} "
                        + "word " * (5 - quality),
                        "tgt_text": sentence.tgt_text,
                        SYSTEM_COLUMN: hostile[name],
                        "score": 5 - quality - position % 2,
                        "uniq_id": sentence.uniq_id,
                    }
                )
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)


def job_resources(values: Iterator[str]) -> dict[str, Any]:
    """Every string setting of a job's resources, each carrying the next payload."""
    return {
        "slurm_partition": next(values),
        "slurm_account": next(values),
        "qos": next(values),
        "constraint": next(values),
        "slurm_extra": next(values),
        "envmodules": [next(values)],
    }


def settings(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every string of a configuration with its path (`a.b.0.c`)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from settings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for number, value in enumerate(node):
            yield from settings(value, f"{path}.{number}")
    elif isinstance(node, str):
        yield path, node


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileRun]:
    """The workflow's `all` and `metaeval`, then its report, with payloads everywhere."""
    beacon = Beacon()
    threading.Thread(target=beacon.serve_forever, daemon=True).start()
    found = payloads(beacon.script)
    names = list(found)
    root = tmp_path_factory.mktemp("hostile")
    workdir = root / "work"
    workdir.mkdir()
    by_direction = dict(zip(DIRECTIONS, names, strict=True))
    payload_of = {direction: found[name] for direction, name in by_direction.items()}
    # Folders named by payloads: a path is a string setting too ('/' makes them nested). Not
    # with `<name>`, which Snakemake takes for a path variable in any path it reads.
    dataset = root / f"dataset {found['javascript-url'][:120]} &amp; {found['separators']}"
    hostile_dataset(dataset, payload_of)
    provided = root / f"provided \"' & {found['javascript-url'][:100]}"
    provided_translations(provided, dataset, payload_of)
    judged = root / f"judged {found['separators']} &lt;.parquet"
    judgements(judged, dataset, SYSTEMS, found)
    # Every other string setting cycles through the payloads.
    values = (found[name] for name in names * 20)
    config: dict[str, Any] = {
        "dataset": {"path": str(dataset), "name": next(values), "revision": next(values)},
        "output_dir": "runs",
        "shards": 1,
        "limit": SENTENCES,
        "directions": {"list": DIRECTIONS},
        "metrics": ["chrf", "bleu"],
        # Sections of metrics the run does not compute: the Run page leaves them out.
        "metricx": {"model": next(values), "tokenizer": next(values)},
        "glotlid": {"model": next(values), "revision": next(values)},
        "comet": {"model": next(values)},
        "resources": {
            stage: {**SMALL_JOBS.get(stage, {}), **job_resources(values)}
            for stage in ("translate", "score", "aggregate")
        },
        "statistics": {"bootstrap_resamples": 100, "ar_trials": 100},
        "metaeval": {
            "judgements": str(judged),
            # Read by a job whose outputs the report shows: Snakemake's report writes its
            # parameters raw into a script element, so a value with '</' or '<!--' is refused
            # before any job (planning.plan.refuse_in_a_script_element).
            "revision": found["svg-onload"],
            "columns": {"system": SYSTEM_COLUMN},
            "permutation_trials": 20,
        },
        "models": [
            {"name": "provided", "translator": "provided", "path": str(provided)},
        ],
    }
    with ChatServer(model=found["svg-onload"]) as server:
        config["models"].insert(
            0,
            {
                "name": "api.model-1",
                "translator": "openai",
                "model": found["svg-onload"],
                "base_url": server.url,
                "api_key_env": None,
                "system_prompt": next(values),
                "extra_body": {"metadata": {"note": next(values)}},
                "resources": job_resources(values),
            },
        )
        workflow = Workflow(workdir)
        workflow.config_path = workdir / f"config {found['comment-script']}.yaml"
        workflow.write_config(config)
        workflow.run("all", "metaeval")
    workflow.run("--report", "report.html")
    yield HostileRun(
        workdir=workdir,
        output=workdir / "runs",
        payloads=found,
        by_direction=by_direction,
        written=dict(settings(config)),
        beacon=beacon,
        config=config,
    )
    beacon.shutdown()
    beacon.server_close()


# --- What a page shows, in either browser ----------------------------------------------------


class Tab:
    """One tab of Chromium or Firefox, and the frame a page of report.html is shown in."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.firefox = isinstance(page, browser.FirefoxPage)

    async def open(self, url: str) -> None:
        """The page at `url`, once loaded (Chromium's navigation returns before: a large page's
        script element would be read half parsed)."""
        await self.value("window.previous = true")  # what marks the page navigated from
        await self.page.open(url)
        await self.wait("window.previous === undefined && document.readyState === 'complete'")

    async def value(self, expression: str, frame: Any = None) -> Any:
        return await self.page.evaluate(expression, frame)

    async def wait(self, expression: str, frame: Any = None) -> Any:
        return await self.page.wait_for(expression, frame=frame, timeout=patience(60))

    async def last_frame(self) -> Any:
        """The page's last child frame, once it has one (Chromium: its id, Firefox: its
        number)."""
        if self.firefox:
            frames = await poll_value(self.page.frames)
            return len(frames) - 1
        frames = await poll_value(self.page.child_frames)
        return frames[-1]["id"]

    async def unharmed(self, where: str, frame: Any = None) -> None:
        """Nothing of a payload ran in the page (or frame): its title and a flag it would
        set, and no link or handler attribute of a payload's making."""
        title = await self.value("document.title", frame)
        assert title != PWNED, where
        assert await self.value("window.pwned === undefined", frame), where
        made = await self.value(
            "document.querySelectorAll('[onload], [onerror], a[href^=javascript], "
            "img[src=x]').length",
            frame,
        )
        assert made == 0, where


async def poll_value(get: Any) -> Any:
    deadline = asyncio.get_running_loop().time() + patience(30)
    while asyncio.get_running_loop().time() < deadline:
        value = await get()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise TimeoutError("no frame")


def in_text(*alternatives: list[str]) -> str:
    """An expression: whether the page's text holds, for each list of `alternatives`, one of
    them (as text: markup would not be)."""
    return (
        "(() => { const text = document.body.textContent;"
        f" return {json.dumps(alternatives)}.every((any) => any.some((t) => text.includes(t)));"
        " })()"
    )


def any_sentence(kind: str, payload: str) -> list[str]:
    return [f"{kind} {n} {payload}" for n in range(SENTENCES)]


async def check_sentences_page(tab: Tab, run: HostileRun, where: str, frame: Any = None) -> None:
    """Every direction of a sentences page: its texts as they were written (the longest cut:
    the 100 kB lines would not fit in the report), its worst sentences, its ids."""
    # Once the page's script ran: its data element parsed whole.
    data = json.loads(
        await tab.wait(
            "document.getElementById('app').dataset.direction !== undefined &&"
            " document.getElementById('data').textContent",
            frame,
        )
    )
    assert sorted(data["directions"]) == sorted(DIRECTIONS), where
    # Long texts are cut before worst sentences are left out (with ids of 100 kB, each
    # sentence's kept whole, the page holds one worst sentence per model).
    assert data["abridged"] == ABRIDGED_CHARACTERS and data["worst"] >= 1, where
    shown_sentences = 1 + len(data["models"]) * data["worst"]
    for direction in data["directions"]:
        payload = run.payloads[run.by_direction[direction]]
        await tab.value(
            "(() => { const box = document.getElementById('direction');"
            f" box.value = {json.dumps(direction)}; box.dispatchEvent(new Event('change'));"
            " return true; })()",
            frame,
        )
        # The sample with every model, then each model's worst.
        await tab.wait(
            f"document.getElementById('app').dataset.direction === {json.dumps(direction)}"
            f" && document.querySelectorAll('dl.sentence').length === {shown_sentences}",
            frame,
        )
        shown = in_text(
            *(
                [text[:ABRIDGED_CHARACTERS] for text in any_sentence(kind, payload)]
                for kind in ("source", "reference", "provided")
            ),
            ["T:"],
        )
        assert await tab.value(shown, frame), (where, direction)
        ids = await tab.value(
            "JSON.stringify(Array.from(document.querySelectorAll('dl.sentence'))"
            ".map((d) => d.dataset.id))",
            frame,
        )
        assert json.loads(ids) and all(i.endswith(f" {payload}") for i in json.loads(ids))


def setting(config: Any, path: str) -> Any:
    for part in path.split("."):
        config = config[int(part)] if isinstance(config, list) else config[part]
    return config


UNUSED_SECTIONS = ("metricx", "glotlid", "comet")


async def check_run_page(tab: Tab, run: HostileRun, where: str, frame: Any = None) -> None:
    """The configuration as written (every string setting shown, the unused metrics'
    sections left out), and each model's manifest as valid JSON."""
    texts = json.loads(
        await tab.wait(
            "document.querySelectorAll('pre').length === 3 && JSON.stringify("
            "Array.from(document.querySelectorAll('pre')).map((p) => p.textContent))",
            frame,
        )
    )
    shown = yaml.safe_load(texts[0])
    assert not set(UNUSED_SECTIONS) & set(shown), where
    # The settings the leaderboard job reads (its slice of the configuration), as written.
    checked = 0
    for path, value in run.written.items():
        try:
            found = setting(shown, path)
        except (KeyError, IndexError, TypeError):
            continue
        assert found == value, (where, path)
        checked += 1
    assert checked >= 5, where
    for text in texts[1:]:
        assert isinstance(json.loads(text)["config"], (dict, str)), where


async def check_page(tab: Tab, run: HostileRun, name: str, frame: Any = None) -> None:
    """One page or figure of the results folder (`name`: its path there), drawn whole, its
    payloads shown as text, none of them run."""
    stem = Path(name).stem.split("-")[0]
    if name.endswith(".svg"):
        assert await tab.wait("document.querySelector('svg') !== null", frame), name
    elif stem == "leaderboard":
        rows = await tab.wait(
            "document.querySelectorAll('#leaderboard tbody tr').length === 2 && JSON.stringify("
            "Array.from(document.querySelectorAll('#leaderboard tbody tr'))"
            ".map((r) => [r.className, r.cells[2].textContent]))",
            frame,
        )
        # The best model's row is green, its cluster an integer (never "1.0").
        assert json.loads(rows)[0] == ["cluster-1", "1"], name
    elif stem == "results":
        await tab.wait("document.querySelector('button[data-view=directions]') !== null", frame)
        await tab.value("document.querySelector('button[data-view=directions]').click()", frame)
        rows = await tab.wait(
            "document.getElementById('app').dataset.view === 'directions' &&"
            " document.getElementById('app').dataset.rows",
            frame,
        )
        assert rows == str(len(DIRECTIONS)), name
        assert await tab.value("document.querySelectorAll('.tabulator-row').length", frame)
    elif stem == "sentences":
        await check_sentences_page(tab, run, name, frame)
    elif stem == "run":
        await check_run_page(tab, run, name, frame)
    elif stem == "which":
        rows = await tab.wait("document.getElementById('app').dataset.rows", frame)
        assert rows == str(len(JUDGED)), name
    else:
        raise AssertionError(f"a page no check knows: {name}")
    await tab.unharmed(name, frame)


def pages_of(output: Path) -> list[str]:
    """Every page and figure of a results folder, by its path from the working folder."""
    found = [*output.glob("report/**/*.html"), *output.glob("report/**/*.svg")]
    found += output.glob("metaeval/*.html")
    return sorted(str(path.relative_to(output.parent)) for path in found)


async def results_folder(tab: Tab, run: HostileRun) -> None:
    for name in pages_of(run.output):
        await tab.open((run.workdir / name).as_uri())
        await check_page(tab, run, name)


# What report.html shows: a page's frame, or a figure's image (not the report's logo).
FIGURE = (
    "Array.from(document.querySelectorAll('img[src^=\"data:image\"]'))"
    ".filter((img) => !img.src.includes('filename=logo.svg')).pop()"
)
SHOWN = f"((document.querySelector('iframe') || {FIGURE} || {{}}).src || '').slice(0, 300)"
CLICK = """(() => {{
    const link = Array.from(document.querySelectorAll('a'))
        .find((a) => a.textContent.trim() === {0});
    if (link) link.click();
    return Boolean(link);
}})()"""


async def report_html(tab: Tab, run: HostileRun) -> None:
    """Every result of every category of report.html, as a reader opens them: menu, category,
    subcategory, each value of its toggle (two figures of a model, one per metric), then each
    result's eye; each page checked in the frame that shows it."""
    await tab.open((run.workdir / "report.html").as_uri())
    categories = json.loads(await tab.wait("typeof categories === 'object' && "
                                           "JSON.stringify(categories)"))  # fmt: skip
    # It opens on the leaderboard, with no click.
    assert "filename=leaderboard.html;" in await tab.wait(SHOWN)
    seen: list[str] = []
    for category, subcategories in sorted(categories.items()):
        for subcategory, paths in sorted(subcategories.items()):
            links = ["Results", category] + ([subcategory] if subcategory != "Other" else [])
            for link in links:
                assert await tab.wait(CLICK.format(json.dumps(link))), (category, link)
            await tab.wait(f"{EYES}.length > 0")
            toggles = await tab.value(TOGGLES + ".length")
            for toggle in range(max(toggles, 1)):
                if toggles:
                    await tab.value(f"{TOGGLES}[{toggle}].click()")
                eyes = await tab.value(f"{EYES}.length")
                for number in range(eyes):
                    await tab.value(f"{EYES}[{number}].click()")
                    seen.append(await shown_result(tab, run, paths, seen))
    assert sorted(seen) == pages_of(run.output)


# The values of a category's toggle (Snakemake's report shows one where a second label has
# two values, each in half of the results).
TOGGLES = "document.querySelectorAll('fieldset input[type=radio]')"
EYES = "document.querySelectorAll('a[iconname=eye]')"


async def shown_result(tab: Tab, run: HostileRun, paths: list[str], seen: list[str]) -> str:
    """Which of `paths` (not yet `seen`) report.html shows once it shows one, checked."""
    names = json.dumps([Path(p).name for p in paths if p not in seen])
    shown = await tab.wait(
        f"(() => {{ const src = {SHOWN}; const name = /filename=([^;]+);/.exec(src);"
        f" return name && {names}.includes(name[1]) && src; }})()"
    )
    name = re.search(r"filename=([^;]+);", shown)
    assert name is not None
    (path,) = [p for p in paths if Path(p).name == name[1]]
    if shown.startswith("data:text/html"):
        await check_page(tab, run, path, await tab.last_frame())
    else:
        assert await tab.wait(f"{FIGURE}.complete && {FIGURE}.naturalWidth > 0"), path
    await tab.unharmed(f"report.html: {path}")
    return path


async def browse_pages(tab: Tab, address: str, run: HostileRun) -> None:
    """Every direction in the sentence browser: every sentence's texts, ids, domain and
    register as written."""
    for direction in DIRECTIONS:
        payload = run.payloads[run.by_direction[direction]]
        await tab.open(f"{address}?direction={direction}")
        await tab.wait("document.getElementById('app').dataset.ready === 'true'")
        shown = await tab.value("document.getElementById('app').dataset.shown")
        assert shown == str(SENTENCES), direction
        expected = [any_sentence(kind, payload) for kind in ("source", "reference", "provided")]
        expected += [[f"s{n} {payload}" for n in range(SENTENCES)]]
        expected += [[f"domain 0 {payload}"], [f"register {payload}"]]
        assert await tab.value(in_text(*expected)), direction
        await tab.unharmed(f"browse {direction}")


async def everything(name: str, run: HostileRun) -> None:
    opened = browser.chromium() if name == "chromium" else browser.firefox()
    async with opened as page:
        tab = Tab(page)
        await results_folder(tab, run)
        await report_html(tab, run)
        with browse_command(run.output) as address:
            await browse_pages(tab, address, run)
        if isinstance(page, browser.Page):
            assert page.errors == []
            # Nothing but the pages' own files, what they inline, and the browser's server.
            assert all(url.startswith(("file://", "data:", address)) for url in page.requests)


@pytest.mark.parametrize("name", ["chromium", "firefox"])
def test_no_payload_runs_and_every_one_shows_as_text(hostile: HostileRun, name: str) -> None:
    browser.require(name)
    asyncio.run(everything(name, hostile))
    assert hostile.beacon.calls == []


def test_every_page_a_run_writes_is_in_its_report(hostile: HostileRun) -> None:
    """The pages and figures the results code wrote are those the workflow declares for the
    report: a page written but not declared would be missing from report.html (one declared
    but not written fails its job)."""
    report = (hostile.workdir / "report.html").read_text(encoding="utf-8")
    found = re.search(r"var results = (\{.*?\});\n", report, re.DOTALL)
    assert found is not None
    assert sorted(json.loads(found[1])) == pages_of(hostile.output)
    categories = re.search(r"var categories = (\{.*?\});\n", report, re.DOTALL)
    assert categories is not None
    # The heatmaps of the models in leaderboard order, numbered.
    board = pd.read_csv(hostile.output / "leaderboard.csv")["model"].tolist()
    heatmaps = sorted(json.loads(categories[1])["4. Heatmaps"])
    assert heatmaps == [f"{n}. {model}" for n, model in enumerate(board, start=1)]


def test_the_browser_answers_with_headers_that_run_only_its_own_scripts(
    hostile: HostileRun,
) -> None:
    with browse_command(hostile.output) as address:
        port = address.rstrip("/").rsplit(":", 1)[1]
        for path, host, status in (
            ("/", None, 200),
            ("/api/directions", None, 200),
            ("/nowhere", None, 404),
            ("/", f"elsewhere.example:{port}", 421),
        ):
            request = urllib.request.Request(address.rstrip("/") + path)
            if host is not None:
                request.add_unredirected_header("Host", host)
            try:
                with urllib.request.urlopen(request, timeout=patience(30)) as reply:
                    headers, code = reply.headers, reply.status
            except urllib.error.HTTPError as error:
                headers, code = error.headers, error.code
            assert code == status, path
            assert headers["X-Content-Type-Options"] == "nosniff", path
            assert headers["X-Frame-Options"] == "DENY", path
            policy = dict(
                part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";")
            )
            assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
            # Only the page's own script, by its hash.
            assert re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", policy["script-src"]), path
            assert policy["connect-src"] == "'self'"
