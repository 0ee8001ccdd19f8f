"""Every sentence of a run as a local web page: `bouquet-eval browse <output_dir>`.

For a direction: every sentence with its source, reference, each model's output and its
per-sentence scores; a model's worst sentences first; two models side by side with their
differences; xCOMET's error spans marked in the translation they were found in; filters by
the dataset's `domain` and `register`. The server listens on
127.0.0.1 only and reads the run's files where they are: each model's scored_rows.parquet
(only the row groups that hold the direction, found once from the two language columns) and,
for domain and register, the dataset file of the direction that the model's manifest names.
Nothing is copied and nothing is fetched from the internet.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from functools import cache, cached_property
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bouquet_eval.core.languages import split_direction
from bouquet_eval.metrics.records import builtin_lower_is_better
from bouquet_eval.results.aggregate import GROUP_COLUMNS
from bouquet_eval.results.leaderboard import primary_metric
from bouquet_eval.results.rendering import content_security_policy, own, render
from bouquet_eval.results.views import describe_language

log = logging.getLogger(__name__)

TEXTS = ("src_text", "ref_text", "mt_text")
FACETS = ("domain", "register")
"""Dataset columns the page filters on, where the dataset has them."""
NOT_SCORES = {*GROUP_COLUMNS, "uniq_id", *TEXTS, "mt_raw"}
SPANS = "xcomet_error_spans"
"""xCOMET's label column: a JSON list per sentence of the errors in its translation."""
CACHED_DIRECTIONS = 8
IDLE_SECONDS = 5


class BrowseError(ValueError):
    pass


class Model:
    """One model's scored_rows.parquet, with the row groups that hold each direction."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        self.schema = pq.read_schema(path)
        self.row_groups = _row_groups(path)

    @property
    def shown_columns(self) -> list[str]:
        """Per model on the page: its translation, scores and, where scored, error spans."""
        return ["mt_text", *self.score_columns, *([SPANS] if SPANS in self.schema.names else [])]

    @cached_property
    def score_columns(self) -> list[str]:
        import pyarrow.types as types

        return [
            field.name
            for field in self.schema
            if field.name not in NOT_SCORES
            and (types.is_floating(field.type) or types.is_integer(field.type))
        ]

    def direction(self, src: str, tgt: str, columns: Sequence[str]) -> pd.DataFrame:
        """The rows of one direction, read from its row groups alone."""
        wanted = [c for c in (*GROUP_COLUMNS, "uniq_id", *columns) if c in self.schema.names]
        groups = self.row_groups.get((src, tgt), [])
        # A file object of this request's own: reads from several threads do not share one.
        with pq.ParquetFile(self.path) as rows:
            table = rows.read_row_groups(groups, columns=wanted) if groups else None
        if table is None:
            return pd.DataFrame(columns=wanted)
        chosen = pc.and_(pc.equal(table["src_lang"], src), pc.equal(table["tgt_lang"], tgt))
        frame = table.filter(chosen).drop_columns(GROUP_COLUMNS).to_pandas()
        return frame.astype({"uniq_id": str})


def _row_groups(path: Path) -> dict[tuple[str, str], list[int]]:
    """Direction -> the row groups of a parquet file that hold its rows (read once, from the
    two language columns: the texts are not read)."""
    index: dict[tuple[str, str], list[int]] = defaultdict(list)
    with pq.ParquetFile(path) as rows:
        for group in range(rows.num_row_groups):
            keys = rows.read_row_group(group, columns=GROUP_COLUMNS)
            pairs = keys.group_by(GROUP_COLUMNS).aggregate([])
            for src, tgt in zip(
                pairs["src_lang"].to_pylist(), pairs["tgt_lang"].to_pylist(), strict=True
            ):
                index[(src, tgt)].append(group)
    return dict(index)


class Run:
    """An output folder: its models (in leaderboard order when there is one) and dataset."""

    def __init__(self, output_dir: Path) -> None:
        if (output_dir / "scored_rows.parquet").is_file():
            # One model's folder, as `bouquet-eval run --output-dir` names it: that model.
            folders = [output_dir]
            output_dir = output_dir.parent
        else:
            folders = sorted(p.parent for p in output_dir.glob("*/scored_rows.parquet"))
        if not folders:
            raise BrowseError(
                f"{output_dir}: neither a model's folder with its scored_rows.parquet nor a "
                "folder of such model folders: score the model first (bouquet-eval run or "
                "score, or the workflow's `all`)"
            )
        order = _leaderboard_order(output_dir / "leaderboard.csv")
        folders.sort(key=lambda f: (order.index(f.name) if f.name in order else len(order), f.name))
        self.output_dir = output_dir
        self.models = [Model(f.name, f / "scored_rows.parquet") for f in folders]
        self.dataset_folder = _dataset_folder(folders)
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def directions(self) -> dict[str, Any]:
        """Every direction with its languages' names and each model's mean scores."""
        tables = []
        for model in self.models:
            path = self.output_dir / model.name / "scores.csv"
            if path.is_file():
                scores = pd.read_csv(path)
                keep = [c for c in scores.columns if c in model.score_columns]
                tables.append(scores[[*GROUP_COLUMNS, *keep]].assign(model=model.name))
        scores = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
        directions: dict[str, dict[str, Any]] = {}
        for record in scores.to_dict(orient="records"):
            name = f"{record['src_lang']}-{record['tgt_lang']}"
            entry = directions.setdefault(
                name,
                {
                    "src": describe_language(record["src_lang"]).name,
                    "tgt": describe_language(record["tgt_lang"]).name,
                    "means": {},
                },
            )
            entry["means"][record["model"]] = {
                k: _number(v) for k, v in record.items() if k not in (*GROUP_COLUMNS, "model")
            }
        metrics = sorted({c for m in self.models for c in m.score_columns})
        return {
            "models": [m.name for m in self.models],
            "metrics": metrics,
            "lower": sorted(set(metrics) & builtin_lower_is_better()),
            # The page opens on the metric that ranks the leaderboard.
            "primary": primary_metric(metrics) if metrics else None,
            "directions": directions,
        }

    def sentences(self, direction: str) -> dict[str, Any]:
        """Every sentence of a direction: texts, facets, and each model's output and scores."""
        with self._lock:
            if direction in self._cache:
                self._cache.move_to_end(direction)
                return self._cache[direction]
        try:
            src, tgt = split_direction(direction)
        except ValueError as error:
            raise BrowseError(str(error)) from None
        first, *others = self.models
        table = first.direction(src, tgt, ["src_text", "ref_text", *first.shown_columns])
        if table.empty:
            raise BrowseError(f"direction {direction} is not in this run")
        table = table.rename(columns=_suffixed(first))
        for model in others:
            rows = model.direction(src, tgt, model.shown_columns)
            table = table.merge(rows.rename(columns=_suffixed(model)), on="uniq_id", how="left")
        facets = self._facets(direction)
        if facets is not None:
            table = table.merge(facets, on="uniq_id", how="left")
        records = json.loads(table.to_json(orient="records", force_ascii=False))
        for model in self.models:
            if SPANS in model.schema.names:
                key = f"{SPANS}|{model.name}"
                for row in records:
                    row[key] = placed_spans(row.get(f"mt_text|{model.name}"), row.get(key))
        result = {
            "direction": direction,
            "facets": [c for c in FACETS if c in table],
            "rows": records,
        }
        with self._lock:
            self._cache[direction] = result
            while len(self._cache) > CACHED_DIRECTIONS:
                self._cache.popitem(last=False)
        return result

    def _facets(self, direction: str) -> pd.DataFrame | None:
        if self.dataset_folder is None:
            return None
        path = self.dataset_folder / f"{direction}.parquet"
        if not path.is_file():
            return None
        present = [c for c in FACETS if c in pq.read_schema(path).names]
        if not present:
            return None
        facets = pd.read_parquet(path, columns=["uniq_id", *present])
        return facets.astype({"uniq_id": str})


def _suffixed(model: Model) -> dict[str, str]:
    return {c: f"{c}|{model.name}" for c in model.shown_columns}


def placed_spans(translation: str | None, spans: str | None) -> list[dict[str, Any]]:
    """One translation's xCOMET error spans (its JSON list), each with the `start` and `end`
    where the page marks it, in characters (code points) of the translation, in the order of
    the translation; a span listed beside the sentence but not marked has None for both and
    comes last.

    xCOMET's offsets come from its tokenizer's offset mapping on the translation as scored
    (mt_text), so they are used where they hold the span's text; its `text` is decoded from
    subword tokens and may differ by the space before a word, hence the comparison without
    surrounding spaces. Where the offsets do not hold the text (another tokenizer, a text
    cleaned after scoring), the span's text is searched for instead: its first occurrence
    that no other mark covers. A span found nowhere, or overlapping a mark, is listed alone."""
    if not spans:
        return []
    text = translation or ""
    entries = json.loads(spans)
    marks: dict[int, tuple[int, int]] = {}

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in marks.values())

    searched = []
    for number, span in enumerate(entries):
        wanted = str(span["text"]).strip()
        start, end = int(span["start"]), int(span["end"])
        if wanted and 0 <= start <= end <= len(text) and text[start:end].strip() == wanted:
            start += text[start:end].index(wanted)  # without the spaces around it
            if free(start, start + len(wanted)):
                marks[number] = (start, start + len(wanted))
        elif wanted:
            searched.append((number, wanted))
    for number, wanted in searched:
        found = text.find(wanted)
        while found >= 0 and not free(found, found + len(wanted)):
            found = text.find(wanted, found + 1)
        if found >= 0:
            marks[number] = (found, found + len(wanted))
    placed = [
        {
            "text": str(span["text"]),
            "severity": str(span["severity"]),
            "confidence": float(span["confidence"]),
            "start": marks[number][0] if number in marks else None,
            "end": marks[number][1] if number in marks else None,
        }
        for number, span in enumerate(entries)
    ]
    return sorted(placed, key=lambda p: (p["start"] is None, p["start"] or 0))


def _number(value: Any) -> Any:
    return None if isinstance(value, float) and value != value else value


def _leaderboard_order(path: Path) -> list[str]:
    if not path.is_file():
        return []
    return [str(name) for name in pd.read_csv(path, usecols=["model"])["model"]]


def _dataset_folder(folders: Sequence[Path]) -> Path | None:
    """The folder of the dataset's `<direction>.parquet` files that the run read, from a
    model's manifest: a local path, or the Hub snapshot at the commit it resolved to (read from
    the local cache only)."""
    from bouquet_eval.data.dataset import DEFAULT_DATASET, resolve_dataset

    for folder in folders:
        manifest = folder / "manifest.json"
        if not manifest.is_file():
            continue
        entries = json.loads(manifest.read_text(encoding="utf-8")).get("entries") or []
        identity = (entries[-1] if entries else {}).get("dataset") or {}
        if not identity:
            continue
        settings = {**DEFAULT_DATASET, **identity}
        if identity.get("commit"):
            settings["revision"] = identity["commit"]
        try:
            return resolve_dataset(settings, fetch=False).root
        except (ValueError, OSError) as error:  # the filters are a convenience: say why not
            log.warning("no domain or register filters: %s", error)
            return None
    return None


class Handler(BaseHTTPRequestHandler):
    run: Run
    # A connection that sends nothing for this long is closed: idle connections do not hold
    # the server's threads for ever.
    timeout = IDLE_SECONDS

    def do_GET(self) -> None:
        url = urlparse(self.path)
        # A page elsewhere whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends
        # its own name as Host: only the names this server listens on are answered.
        if self.headers.get("Host", "").lower() not in cast("Server", self.server).hosts:
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "unknown Host")
            return
        try:
            if url.path == "/":
                self._send("text/html; charset=utf-8", page().encode("utf-8"))
            elif url.path == "/api/directions":
                self._json(self.run.directions())
            elif url.path == "/api/sentences":
                direction = parse_qs(url.query).get("direction", [""])[0]
                self._json(self.run.sentences(direction))
            else:
                self.send_error(HTTPStatus.NOT_FOUND)
        except BrowseError as error:
            self._json({"error": str(error)}, HTTPStatus.BAD_REQUEST)

    def _json(self, value: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        body = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        self._send("application/json; charset=utf-8", body, status)

    def _send(self, kind: str, body: bytes, status: HTTPStatus = HTTPStatus.OK) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def end_headers(self) -> None:
        # On every answer, errors included: read only as what it says it is, run only the
        # page's own scripts, never inside another site's frame.
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


PAGE_SCRIPTS = (("dom.js", "browse.js"),)


@cache
def page() -> str:
    return render(
        "browse.html",
        "bouquet-eval: sentences",
        heading="Sentences",
        styles=("views.css", "browse.css"),
        scripts=PAGE_SCRIPTS,
        connect=True,
    )


SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": content_security_policy(
        [own(*scripts) for scripts in PAGE_SCRIPTS], connect=True
    )
    + "; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
}


class Server(ThreadingHTTPServer):
    """One thread per connection, on 127.0.0.1; answers only Host names of that address."""

    # Connections waiting to be accepted: the standard library's 5 drops a burst of them.
    request_queue_size = 1024

    @property
    def hosts(self) -> frozenset[str]:
        port = self.server_port
        return frozenset(f"{name}:{port}" for name in ("127.0.0.1", "localhost"))


def serve(output_dir: Path, port: int) -> Server:
    """A server for `output_dir` on 127.0.0.1 (port 0: any free one); call serve_forever."""
    handler = type("RunHandler", (Handler,), {"run": Run(output_dir)})
    return Server(("127.0.0.1", port), handler)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="bouquet-eval browse",
        description="Serve every sentence of a run's output folder as a local web page.",
    )
    parser.add_argument(
        "output_dir",
        type=Path,
        help="a run's output_dir (e.g. runs: every model in it, side by side), or one model's "
        "folder (e.g. runs/my-model, what bouquet-eval --output-dir names)",
    )
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any)")
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        server = serve(arguments.output_dir, arguments.port)
    except (BrowseError, OSError) as error:
        print(f"bouquet-eval: {error}", file=sys.stderr)
        return 1
    url = f"http://127.0.0.1:{server.server_port}/"
    print(f"Serving {arguments.output_dir} at {url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
