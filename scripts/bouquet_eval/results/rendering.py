"""HTML from the Jinja2 templates in `templates/`, with autoescaping on: the report's pages and
the sentence browser's.

Every value a template shows is escaped for where it lands, by the template engine: nothing
is HTML until this module says so, and it says so only of the package's own scripts and
styles (`assets/`) and of its own SVG (`svgplot`). Data for a page's script enters through one
function, `script_json` (the templates' `tojson`), whose output no text can break out of.
Each page carries a Content-Security-Policy that lets only its own scripts run: a text that
escaped as markup would still run nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.core.io import unpaired_surrogate

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup

# The Snakemake report (report.html) opens each page from a base64 data: URL, 4/3 of the
# page's size, and Chromium opens none over 2 MiB: every page stays under this many bytes.
PAGE_BYTES = 1_400_000
# Where a page would not fit, each long text is cut to this many characters.
ABRIDGED_CHARACTERS = 2_000
TEMPLATES = Path(__file__).parent / "templates"
ASSETS = Path(__file__).parent / "assets"

# In JSON these occur only inside strings, where their escapes mean the same characters.
_SCRIPT_ESCAPES = {
    # No `</script>` ends the element, no `<!--` or `<script` enters the HTML parser's
    # script-data escape states (where the element's end would no longer be found).
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    # Line ends in JavaScript before ES2019.
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
# A code point of a surrogate in a Python string is always unpaired: not text, not UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def script_json(data: Any) -> Markup:
    """`data` as JSON that is safe as the text of a script element in every state of the HTML
    parser (`_SCRIPT_ESCAPES`); an unpaired surrogate is written as its escape too, which
    JSON.parse reads back as it was. Not a number (NaN) is an error: JSON has none, and
    JSON.parse would reject the whole page's data."""
    from markupsafe import Markup

    # A page's data is plain lists and mappings: no cycle to look for.
    text = json.dumps(
        data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False
    )
    for character, escape in _SCRIPT_ESCAPES.items():
        if character in text:
            text = text.replace(character, escape)
    if unpaired_surrogate(text) is not None:  # rare: encoding finds out faster than a search
        text = _SURROGATE.sub(lambda match: f"\\u{ord(match[0]):04x}", text)
    return Markup(text)


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_text,
    )
    environment.filters["tojson"] = script_json
    return environment


def _text(value: Any) -> Any:
    """A value as a template shows it: an unpaired surrogate in a string (not text, and not
    writable as UTF-8) becomes U+FFFD, as a browser shows what it cannot decode. The pages'
    own scripts and data (Markup) hold none: `script_json` escapes them."""
    if type(value) is str and not value.isascii():
        return _SURROGATE.sub("\ufffd", value)
    return value


@cache
def asset(name: str) -> str:
    """The text of one of the package's own scripts or styles (`assets/`)."""
    return (ASSETS / name).read_text(encoding="utf-8")


@cache
def own(*names: str) -> Markup:
    """The package's assets `names`, joined: text that the pages take as it is (scripts and
    styles we ship, `tests/test_pages.py` checks that none can end its element early)."""
    from markupsafe import Markup

    return Markup("".join(asset(name) for name in names))


@cache
def _source_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def content_security_policy(scripts: Sequence[str], connect: bool = False) -> str:
    """A policy under which only the script elements `scripts` run (by their hashes): no other
    inline script, event handler attribute, `javascript:` URL or fetched script; nothing is
    fetched but, where `connect`, the server's own answers (the sentence browser's). Inline
    styles stay allowed: the figures' SVG is styled by attributes."""
    directives = {
        "default-src": "'none'",
        "script-src": " ".join(map(_source_hash, scripts)) or "'none'",
        "style-src": "'unsafe-inline'",
        "img-src": "data:",
        "connect-src": "'self'" if connect else "'none'",
        "base-uri": "'none'",
        "form-action": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def render(
    template: str,
    title: str,
    *,
    styles: Sequence[str] = ("report.css",),
    scripts: Sequence[Sequence[str]] = (),
    heading: str | None = None,
    connect: bool = False,
    **context: Any,
) -> str:
    """The page of `template` (one that extends page.html): `title`, the package's stylesheets
    `styles` and one script element per group of the package's scripts in `scripts`, under a
    policy that lets only those run."""
    elements = [own(*group) for group in scripts]
    return (
        _environment()
        .get_template(template)
        .render(
            title=title,
            heading=heading,
            styles=own(*styles),
            scripts=elements,
            policy=content_security_policy(elements, connect),
            **context,
        )
    )


def interactive_page(
    template: str,
    title: str,
    data: Any,
    script: str,
    tables: bool = True,
    styles: Sequence[str] = (),
) -> str:
    """A page whose `script` (ours, in assets/) draws `data`, with the vendored Tabulator
    where it has `tables`, and the package's stylesheets `styles` after the shared ones."""
    library = ("tabulator/tabulator_simple.min.css",) if tables else ()
    scripts = [("tabulator/tabulator.min.js",)] if tables else []
    return render(
        template,
        title,
        styles=(*library, "report.css", "views.css", *styles),
        scripts=[*scripts, ("dom.js", script)],
        data=data,
    )


def abridged(value: Any) -> Any:
    """`value` with every string longer than `ABRIDGED_CHARACTERS` cut to that many."""
    if isinstance(value, str) and len(value) > ABRIDGED_CHARACTERS:
        cut = len(value) - ABRIDGED_CHARACTERS
        return f"{value[:ABRIDGED_CHARACTERS]}… ({cut:,} more characters)"
    if isinstance(value, Mapping):
        return {key: abridged(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [abridged(item) for item in value]
    return value
