"""The Hugging Face Hub: fetching what a run needs once, then reading it from the local cache.

Everything goes through huggingface_hub, so its settings apply as usual: HF_HOME or
HF_HUB_CACHE (where the cache is), HF_ENDPOINT, HF_TOKEN (or `hf auth login`) and
HF_HUB_OFFLINE. Failures become one `HubError` message that says what to do (accept a gated
repository's conditions, set a token, fetch on a machine with network access) instead of a
traceback from the client.

Which files a model needs is decided from the repository's listing at the resolved commit
(`select_files`), so that a prefetch brings exactly what the loaders read and no more:

- "config": the top-level JSON files that are neither tokenizer files nor weight indexes
  (config.json, generation_config.json, and what some models add, e.g. quantize_config.json);
- "tokenizer": config.json (AutoTokenizer reads the model type there when the tokenizer's own
  config does not name its class) and the tokenizer files of `TOKENIZER_PATTERNS`;
- "weights": one format, in transformers' order of preference (`WEIGHT_FORMATS`): a single
  safetensors file, the shards of a safetensors index, then the same for PyTorch's .bin.
  Other formats (TensorFlow, Flax, ONNX, GGUF) and copies of the weights are left out.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bouquet_eval.core.config import ConfigError

PARTS = ("config", "tokenizer", "weights")
TOKENIZER_PATTERNS = (
    "tokenizer_config.json",
    "tokenizer.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "*.model",  # sentencepiece: spiece.model, sentencepiece.bpe.model, tokenizer.model
    "*.tiktoken",
    "tekken.json",
    "chat_template.jinja",
    "chat_template.json",
    "additional_chat_templates/*.jinja",
)
# (single file, index of shards), in the order transformers looks for them.
WEIGHT_FORMATS = (
    ("model.safetensors", "model.safetensors.index.json"),
    ("pytorch_model.bin", "pytorch_model.bin.index.json"),
)
WEIGHT_INDEXES = frozenset(index for _, index in WEIGHT_FORMATS)
DOWNLOAD_THREADS = 8


class HubError(ConfigError):
    """Something the run needs from the Hugging Face Hub cannot be had; the message says why
    and what to do."""


@dataclass(frozen=True)
class HubFiles:
    """What one part of a run needs from one hub repository: `parts` of it, or one `filename`."""

    repo_id: str
    revision: str | None
    needed_by: str
    """Who needs it, for messages: "model 'nllb-600m'", "metricx.tokenizer", ..."""
    parts: tuple[str, ...] = ()
    filename: str | None = None
    repo_type: str = "model"

    def __post_init__(self) -> None:
        unknown = set(self.parts) - set(PARTS)
        if unknown or bool(self.parts) == (self.filename is not None):
            raise ValueError(f"HubFiles needs parts of {PARTS} or one filename, not {self}")

    @property
    def name(self) -> str:
        return f"{self.repo_type} {self.repo_id}@{self.revision or 'main'}"


@dataclass(frozen=True)
class Fetched:
    """Files of one repository in the local cache, at the commit the revision resolved to."""

    need: HubFiles
    commit: str
    files: tuple[str, ...]


def repository_url(repo_id: str, repo_type: str = "model") -> str:
    """The repository's page on the Hub, where gated repositories ask for access."""
    from huggingface_hub import constants

    prefix = "" if repo_type == "model" else f"{repo_type}s/"
    return f"{constants.ENDPOINT}/{prefix}{repo_id}"


def offline() -> bool:
    from huggingface_hub import constants

    return constants.is_offline_mode()


def is_local(spec: str) -> bool:
    """A path that exists is read from disk; anything else names a repository on the Hub."""
    return Path(spec).expanduser().exists()


def model_folder(
    spec: str, files: Sequence[str], what: str, extra: Sequence[str] = (), hint: str = ""
) -> Path:
    """The folder holding a model's `files`: `spec` itself when it is a local folder, else its
    snapshot in the Hugging Face cache (never the network; `extra` files are taken into the
    snapshot where the repository has them). FileNotFoundError names `what`, `spec` and the
    files missing, followed by `hint`."""
    if is_local(spec):
        folder = Path(spec).expanduser()
    else:
        folder = snapshot(
            spec,
            "model",
            "main",
            [*files, *extra],
            fetch=False,
            what=f"{what} {spec}",
            otherwise="run `snakemake prefetch` where the Hub can be reached",
        )
    missing = [name for name in files if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{what} {spec}: {folder} lacks {', '.join(missing)}" + (f" ({hint})" if hint else "")
        )
    return folder


def snapshot(
    repo_id: str,
    repo_type: str,
    revision: str,
    patterns: Sequence[str],
    *,
    fetch: bool,
    what: str,
    otherwise: str = "",
) -> Path:
    """The cache folder of the repository at `revision` holding the files that match `patterns`.

    `fetch=True` resolves `revision` on the Hub (a branch that moved is noticed) and downloads
    what the cache lacks; when the Hub cannot be reached the cache is used as it is. A commit
    hash whose files are cached costs no request. `fetch=False` reads only the cache (a job,
    once the workflow's main process has fetched). `otherwise` ends the message when the
    files are neither cached nor to be had from the Hub: what else the user can do.
    """
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(
            repo_id,
            repo_type=repo_type,
            revision=revision,
            allow_patterns=list(patterns),
            local_files_only=not fetch,
        )
    except Exception as error:
        url = repository_url(repo_id, repo_type)
        raise HubError(explain(error, what, url, fetch, otherwise)) from None
    return Path(folder)


@dataclass(frozen=True)
class Located:
    """Files of one folder of a repository at one commit, before they are fetched: the cache
    folder the repository's files have at that commit (it may not exist yet), and the names of
    the folder's files."""

    snapshot: Path
    names: tuple[str, ...]


def locate(
    repo_id: str,
    repo_type: str,
    revision: str,
    folder: str,
    *,
    what: str,
    otherwise: str = "",
    recursive: bool = False,
) -> Located | None:
    """Ask the Hub which commit `revision` is and which files `folder` holds there (in its
    folders too where `recursive`), writing nothing: neither the cache nor its record of the
    revision changes (`snapshot` with `fetch=True` then downloads them). None when the Hub
    cannot be asked (HF_HUB_OFFLINE, no network, an error status) and the cache holds the
    repository at `revision`: it is read as it is, as `snapshot` would read it; HubError when
    it does not, or the revision is unknown.
    """
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import EntryNotFoundError, RevisionNotFoundError
    from huggingface_hub.file_download import repo_folder_name
    from huggingface_hub.hf_api import RepoFile

    try:
        if offline():
            raise OSError("HF_HUB_OFFLINE is set")
        api = HfApi()
        # Not `resolve_revision`, which records the revision's commit in the cache.
        commit = api.repo_info(repo_id, repo_type=repo_type, revision=revision).sha
        if commit is None:
            raise OSError("the Hub named no commit for the revision")
        try:
            entries = list(
                api.list_repo_tree(
                    repo_id,
                    path_in_repo=folder,
                    recursive=recursive,
                    repo_type=repo_type,
                    revision=commit,
                )
            )
        except EntryNotFoundError:  # no such folder at that commit
            entries = []
    except RevisionNotFoundError as error:
        raise HubError(explain(error, what, repository_url(repo_id, repo_type), True)) from None
    except Exception as error:
        try:
            snapshot(repo_id, repo_type, revision, [f"{folder}/*"], fetch=False, what=what)
        except HubError:
            url = repository_url(repo_id, repo_type)
            raise HubError(explain(error, what, url, True, otherwise)) from None
        return None
    cached = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
    names = sorted(
        entry.path.removeprefix(f"{folder}/") for entry in entries if isinstance(entry, RepoFile)
    )
    return Located(cached / "snapshots" / commit, tuple(names))


def read_file(
    repo_id: str, repo_type: str, commit: str, filename: str, *, what: str, otherwise: str = ""
) -> bytes:
    """The content of one file of the repository at `commit`, read from the Hub into memory:
    nothing is written, the cache is left as it is. HubError says why it cannot be had."""
    from huggingface_hub import constants, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(repo_id, filename, repo_type=repo_type, revision=commit)
    try:
        # The wait `hf_hub_download` allows for an answer (HF_HUB_DOWNLOAD_TIMEOUT).
        timeout = constants.HF_HUB_DOWNLOAD_TIMEOUT
        response = get_session().get(url, headers=build_hf_headers(), timeout=timeout)
        hf_raise_for_status(response)
    except Exception as error:
        explained = explain(error, what, repository_url(repo_id, repo_type), True, otherwise)
        raise HubError(explained) from None
    return response.content


def fetch(need: HubFiles) -> Fetched:
    """Download what `need` names at its revision, unless cached; which files, at which commit."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.hf_api import RepoFile

    what = f"{need.name} ({need.needed_by})"
    if offline():
        # Which files a part takes is read from the repository's listing, on the Hub.
        raise HubError(f"{what}: fetching needs the Hub, and HF_HUB_OFFLINE is set")
    try:
        api = HfApi()
        commit = api.resolve_revision(
            need.repo_id, repo_type=need.repo_type, revision=need.revision
        ).resolved

        def download(filename: str) -> Path:
            return Path(
                hf_hub_download(need.repo_id, filename, repo_type=need.repo_type, revision=commit)
            )

        if need.filename is not None:
            files: list[str] = [need.filename]
        else:
            listing = [
                entry.path
                for entry in api.list_repo_tree(
                    need.repo_id, repo_type=need.repo_type, revision=commit, recursive=True
                )
                if isinstance(entry, RepoFile)
            ]
            files = select_files(listing, need, lambda name: json.loads(download(name).read_text()))
        with ThreadPoolExecutor(DOWNLOAD_THREADS) as pool:
            list(pool.map(download, files))
    except HubError:
        raise
    except Exception as error:
        url = repository_url(need.repo_id, need.repo_type)
        raise HubError(explain(error, what, url, True)) from None
    return Fetched(need, commit, tuple(files))


def cached(need: HubFiles) -> bool:
    """Whether the local cache holds what `need` names at its revision, as a fetch leaves it:
    its file, or a file of each part it takes (and every shard a weight index names). Sends
    no request."""
    from huggingface_hub import snapshot_download

    try:
        folder = Path(
            snapshot_download(
                need.repo_id,
                repo_type=need.repo_type,
                revision=need.revision,
                local_files_only=True,
            )
        )
    except Exception:  # LocalEntryNotFoundError: not even the revision is cached
        return False
    if need.filename is not None:
        return (folder / need.filename).is_file()
    listing = [path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()]

    def read_json(name: str) -> Any:
        return json.loads((folder / name).read_text(encoding="utf-8"))

    try:
        for part in need.parts:
            files = select_files(listing, replace(need, parts=(part,)), read_json)
            if part == "tokenizer":  # config.json alone is no tokenizer
                files = [name for name in files if matches_any(name, TOKENIZER_PATTERNS)]
            if not files or not all((folder / name).is_file() for name in files):
                return False
    except (HubError, OSError, ValueError, KeyError):  # no weights, a broken index
        return False
    return True


def check_reachable(need: HubFiles, hint: str) -> None:
    """Raise HubError, saying why and what to do, unless the cache holds `need` or the Hub
    can be asked for it (then a job fetches it as it loads). `hint`: how the user fetches it
    beforehand, as the interface they use says it."""
    what = f"{need.name} ({need.needed_by})"
    if cached(need):
        return
    url = repository_url(need.repo_id, need.repo_type)
    if offline():
        raise HubError(missing_from_cache(what, "HF_HUB_OFFLINE is set", hint))
    from huggingface_hub import HfApi

    try:
        HfApi().resolve_revision(need.repo_id, repo_type=need.repo_type, revision=need.revision)
    except Exception as error:
        raise HubError(explain(error, what, url, True, hint=hint)) from None


def select_files(
    listing: Iterable[str], need: HubFiles, read_json: Callable[[str], Any]
) -> list[str]:
    """The files of a repository listing that `need.parts` take; `read_json` reads one of them
    (a weight index, to find its shards)."""
    available = sorted(listing)
    top = [name for name in available if "/" not in name]
    tokenizer = [name for name in available if matches_any(name, TOKENIZER_PATTERNS)]
    chosen: list[str] = []
    if "config" in need.parts:
        chosen += [
            name
            for name in top
            if name.endswith(".json") and name not in tokenizer and name not in WEIGHT_INDEXES
        ]
    if "tokenizer" in need.parts:
        chosen += [name for name in ("config.json",) if name in top] + tokenizer
    if "weights" in need.parts:
        chosen += weight_files(set(top), need, read_json)
    return sorted(set(chosen))


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """Whether a repository path matches a pattern of the same depth (`*` stays in a folder)."""
    return any(
        fnmatch.fnmatch(name, pattern) and name.count("/") == pattern.count("/")
        for pattern in patterns
    )


def weight_files(top: set[str], need: HubFiles, read_json: Callable[[str], Any]) -> list[str]:
    """The weights of the first format of `WEIGHT_FORMATS` at the top of the repository."""
    for single, index in WEIGHT_FORMATS:
        if single in top:
            return [single]
        if index in top:
            shards = sorted(set(read_json(index)["weight_map"].values()))
            return [index, *shards]
    expected = ", ".join(name for pair in WEIGHT_FORMATS for name in pair)
    raise HubError(
        f"{need.name} ({need.needed_by}) has no weights in a format transformers loads: "
        f"expected one of {expected} at the top of the repository"
    )


def explain(
    error: Exception, what: str, url: str, fetch: bool, otherwise: str = "", hint: str | None = None
) -> str:
    """One message for a failure to get `what` (at `url`): the cause and what to do (`hint`:
    how to fetch it; by default, as the interface in use says it)."""
    import httpx2
    from huggingface_hub import constants, get_token
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
        RevisionResolutionError,
    )

    token = get_token()
    if isinstance(error, GatedRepoError):
        if token is None:
            return (
                f"{what} is gated: accept its conditions at {url} with your Hugging Face "
                f"account, then give the workflow a token of that account (create one at "
                f"{constants.ENDPOINT}/settings/tokens, then `export HF_TOKEN=hf_...` or run "
                "`hf auth login`); no token was found"
            )
        return (
            f"{what} is gated and the token in use (HF_TOKEN or `hf auth login`) has no "
            f"access to it: accept its conditions at {url} with the account the token belongs "
            "to (access may be granted by hand, after a review)"
        )
    if isinstance(error, RevisionNotFoundError):
        return f"{what}: the revision is not in the repository ({url})"
    if isinstance(error, RepositoryNotFoundError):
        return (
            f"{what}: no such repository at {url}, or it is private and the token in use "
            "has no access to it"
        )
    if isinstance(error, HfHubHTTPError) and error.response.status_code == 401 and token:
        return f"{what}: the Hub rejected the token in use (HF_TOKEN or `hf auth login`)"
    # Missing from the cache (OSError: LocalEntryNotFoundError, a 5xx), or no answer from the Hub.
    if isinstance(error, (OSError, RevisionResolutionError, httpx2.TransportError)):
        if not fetch:
            reason = "this job reads only the cache, which the workflow's main process fills"
        elif offline():
            reason = "HF_HUB_OFFLINE is set"
        else:
            reason = f"the Hub ({constants.ENDPOINT}) could not be reached"
        return missing_from_cache(what, reason, hint, otherwise)
    return f"{what}: {type(error).__name__}: {error}"


def missing_from_cache(what: str, reason: str, hint: str | None = None, otherwise: str = "") -> str:
    """`what` is not in the cache and cannot be had now (`reason`): how to fetch it."""
    from huggingface_hub import constants

    from bouquet_eval.core.home import fetch_hint

    return (
        f"{what} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and {reason}. "
        f"{hint or fetch_hint()} {otherwise}"
    ).rstrip()
