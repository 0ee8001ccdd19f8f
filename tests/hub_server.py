"""A local stand-in for the Hugging Face Hub, speaking the part of its HTTP API that
huggingface_hub (2.4) uses to resolve revisions and download files, for tests run offline.

    with HubServer() as hub:
        bouquet = hub.repository("facebook/bouquet", "dataset", gated=True)
        first = bouquet.commit({"data/a.parquet": b"..."})       # on main
        bouquet.commit({"data/a.parquet": b"changed"})           # main moves on
        hub.grant("hf_reader", bouquet)
        ... HF_ENDPOINT=hub.url HF_TOKEN=hf_reader ...
        hub.downloads()  # the files whose bytes were sent

Repositories hold git-like commits (each a full tree, with git blob ids) and branches that
move when committed to or `move`d. The routes, headers and error codes are those the client
reads (huggingface_hub/hf_api.py, file_download.py, utils/_http.py):

- `GET /api/{models,datasets}/{repo}[/revision/{rev}]`: the repository's info; `sha` is the
  commit the revision points to.
- `GET /api/{models,datasets}/{repo}/tree/{rev}[/{path}]?recursive=`: the listing, in pages
  linked by a `Link: <...>; rel="next"` header.
- `HEAD|GET /[datasets/]{repo}/resolve/{rev}/{path}`: `X-Repo-Commit` and `ETag` (the git blob
  id); files stored with LFS (by extension, as `.gitattributes` does on the Hub) answer 302 to
  a signed URL on another origin (`localhost` instead of `127.0.0.1`, as the Hub's CDN), with
  `X-Linked-Etag` (their sha256) and `X-Linked-Size`. The CDN refuses a wrong signature.
- Errors carry `X-Error-Code` (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo) and
  `X-Error-Message`. As on the Hub, a gated repository's info and listing are public and its
  files are not: 401 without a token, 403 for a token that was not granted access, and 401
  "Invalid credentials" for a token the Hub does not know.

Every request is recorded with the token it carried.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import hmac
import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LFS_PATTERNS = ("*.bin", "*.safetensors", "*.parquet", "*.model", "*.h5", "*.msgpack")
SIGNING_KEY = b"hub-server-cdn"


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def files_of(folder: Path, prefix: str = "") -> dict[str, bytes]:
    """Every file under `folder`, keyed by its path in a repository, under `prefix`."""
    return {
        prefix + path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def stored_with_lfs(path: str) -> bool:
    return any(fnmatch.fnmatch(path.rsplit("/", 1)[-1], pattern) for pattern in LFS_PATTERNS)


@dataclass
class Repository:
    repo_id: str
    repo_type: str  # "model" or "dataset"
    gated: bool = False
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.repo_type}s/{self.repo_id}"

    def commit(
        self, changes: dict[str, bytes | None], branch: str = "main", replace: bool = False
    ) -> str:
        """Apply `changes` (None deletes a file) on top of `branch`, or instead of its files
        with `replace`; the branch moves to the new commit, whose id is returned."""
        parent = self.branches.get(branch)
        files = {} if replace or parent is None else dict(self.commits[parent])
        for path, content in changes.items():
            if content is None:
                files.pop(path, None)
            else:
                files[path] = content
        tree = "".join(
            f"{path}\0{git_blob_id(content)}\n" for path, content in sorted(files.items())
        )
        sha = hashlib.sha1(f"parent {parent}\n{tree}{len(self.commits)}".encode()).hexdigest()
        self.commits[sha] = files
        self.branches[branch] = sha
        return sha

    def move(self, branch: str, sha: str) -> None:
        """Point `branch` at an existing commit (a force-push)."""
        if sha not in self.commits:
            raise KeyError(sha)
        self.branches[branch] = sha

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.branches.get(revision)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    token: str | None


class HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str, commit: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.commit = status, code, message, commit


@contextlib.contextmanager
def _serving(hub: HubServer) -> Iterator[ThreadingHTTPServer]:
    """An HTTP server for `hub` on a free port of the loopback interface, in a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.hub = hub  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


class HubServer:
    """See the module docstring. `page_size` bounds a tree listing's pages (the Hub's is 1000)."""

    def __init__(self, page_size: int = 1000) -> None:
        self.page_size = page_size
        self.repositories: dict[str, Repository] = {}
        self.grants: dict[str, set[str]] = {}
        self._requests: list[Request] = []
        self._sent: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._running = contextlib.ExitStack()

    def __enter__(self) -> HubServer:
        self._server = self._running.enter_context(_serving(self))
        return self

    def __exit__(self, *exception: object) -> None:
        self._running.close()
        self._server = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the hub server is not running; use it in a `with` block")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """What HF_ENDPOINT is set to."""
        return f"http://127.0.0.1:{self.port}"

    def environment(self, home: Path, token: str | None = None) -> dict[str, str]:
        """Environment variables for a client of this hub, over any inherited ones: the cache
        under `home`, online, with `token` as HF_TOKEN (None: no token)."""
        return {
            "HF_ENDPOINT": self.url,
            "HF_HOME": str(home),
            "HF_HUB_CACHE": str(home / "hub"),
            "HF_HUB_OFFLINE": "0",
            "HF_TOKEN": token or "",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }

    def repository(self, repo_id: str, repo_type: str = "model", gated: bool = False) -> Repository:
        repository = Repository(repo_id, repo_type, gated)
        self.repositories[repository.key] = repository
        return repository

    def grant(self, token: str, *repositories: Repository) -> None:
        """Make `token` known, with access to the gated `repositories`."""
        self.grants.setdefault(token, set()).update(r.key for r in repositories)

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def downloads(self) -> list[str]:
        """`<repo key>/<path>` of every file whose bytes were sent, in order, e.g.
        `models/google/mt5-xl/spiece.model` or `datasets/facebook/bouquet/README.md`."""
        with self._lock:
            return list(self._sent)

    def clear(self) -> None:
        """Forget the requests and downloads so far."""
        with self._lock:
            self._requests.clear()
            self._sent.clear()

    def record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def record_download(self, repository: Repository, path: str) -> None:
        with self._lock:
            self._sent.append(f"{repository.key}/{path}")

    # --- the API -------------------------------------------------------------------------

    def find(self, repo_type: str, repo_id: str, token: str | None) -> Repository:
        repository = self.repositories.get(f"{repo_type}s/{repo_id}")
        if repository is None:
            # The Hub does not tell a missing repository from a private one to strangers.
            status = 404 if token in self.grants else 401
            raise HubError(status, "RepoNotFound", "Repository not found")
        return repository

    def commit_of(self, repository: Repository, revision: str) -> str:
        sha = repository.resolve(revision)
        if sha is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return sha

    def check_access(self, repository: Repository, token: str | None) -> None:
        if token is not None and token not in self.grants:
            raise HubError(401, None, "Invalid credentials in Authorization header")
        if not repository.gated or repository.key in self.grants.get(token or "", ()):
            return
        kind = repository.repo_type
        if token is None:
            raise HubError(
                401,
                "GatedRepo",
                f"Access to {kind} {repository.repo_id} is restricted. You must have access to "
                "it and be authenticated to access it. Please log in.",
            )
        raise HubError(
            403,
            "GatedRepo",
            f"Access to {kind} {repository.repo_id} is restricted and you are not in the "
            f"authorized list. Visit {self.url}/{repository.key} to ask for access.",
        )

    def info(self, repository: Repository, revision: str) -> dict[str, Any]:
        sha = self.commit_of(repository, revision)
        return {
            "_id": hashlib.sha1(repository.key.encode()).hexdigest()[:24],
            "id": repository.repo_id,
            "sha": sha,
            "private": False,
            "gated": "manual" if repository.gated else False,
            "disabled": False,
            "siblings": [{"rfilename": path} for path in sorted(repository.commits[sha])],
        }

    def tree(
        self, repository: Repository, revision: str, folder: str, recursive: bool
    ) -> list[dict[str, Any]]:
        sha = self.commit_of(repository, revision)
        prefix = f"{folder}/" if folder else ""
        entries: dict[str, dict[str, Any]] = {}
        for path, content in sorted(repository.commits[sha].items()):
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                directory = prefix + "/".join(parts[:depth])
                entries.setdefault(directory, {"type": "directory", "oid": sha, "size": 0})
                if not recursive:
                    break
            if recursive or len(parts) == 1:
                entries[path] = file_entry(path, content)
        if folder and not entries:
            raise HubError(404, "EntryNotFound", f"{folder} does not exist on {revision}")
        return [{**entry, "path": path} for path, entry in entries.items()]

    def signed_url(self, repository: Repository, path: str, sha: str) -> str:
        query = urllib.parse.urlencode({"commit": sha, "signature": self.signature(path, sha)})
        return f"http://localhost:{self.port}/files/{repository.key}/{path}?{query}"

    def signature(self, path: str, sha: str) -> str:
        return hmac.new(SIGNING_KEY, f"{sha}/{path}".encode(), "sha256").hexdigest()


def lfs_pointer(content: bytes) -> bytes:
    """The small file git stores in place of an LFS file."""
    sha256 = hashlib.sha256(content).hexdigest()
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(content)}\n"
    ).encode()


def file_entry(path: str, content: bytes) -> dict[str, Any]:
    if not stored_with_lfs(path):
        return {"type": "file", "oid": git_blob_id(content), "size": len(content)}
    pointer = lfs_pointer(content)
    lfs = {
        "oid": hashlib.sha256(content).hexdigest(),
        "size": len(content),
        "pointerSize": len(pointer),
    }
    return {"type": "file", "oid": git_blob_id(pointer), "size": len(content), "lfs": lfs}


class _Handler(BaseHTTPRequestHandler):
    # Keep-alive, as the Hub: every reply sets Content-Length.
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the request record instead."""

    def do_HEAD(self) -> None:
        self.answer(send_body=False)

    def do_GET(self) -> None:
        self.answer(send_body=True)

    def answer(self, send_body: bool) -> None:
        hub: HubServer = self.server.hub
        authorization = self.headers.get("Authorization", "")
        token = authorization.removeprefix("Bearer ").strip() or None
        hub.record(Request(self.command, self.path, token))
        target = urllib.parse.urlsplit(self.path)
        segments = [urllib.parse.unquote(part) for part in target.path.strip("/").split("/")]
        query = dict(urllib.parse.parse_qsl(target.query))
        try:
            if token is not None and token not in hub.grants:
                raise HubError(401, None, "Invalid credentials in Authorization header")
            if segments[0] == "api" and len(segments) >= 4:
                self.api(hub, segments[1].removesuffix("s"), segments[2:], query, token)
            elif segments[0] == "files":
                self.cdn(hub, segments[1:], query, send_body)
            else:
                repo_type = "dataset" if segments[0] == "datasets" else "model"
                self.resolve(hub, repo_type, segments[repo_type == "dataset" :], token, send_body)
        except HubError as error:
            headers = {"X-Error-Message": error.message}
            if error.code:
                headers["X-Error-Code"] = error.code
            if error.commit:
                headers["X-Repo-Commit"] = error.commit
            self.reply(error.status, {"error": error.message}, headers, send_body)

    def api(
        self,
        hub: HubServer,
        repo_type: str,
        segments: list[str],
        query: dict[str, str],
        token: str | None,
    ) -> None:
        repository = hub.find(repo_type, "/".join(segments[:2]), token)
        action, arguments = (segments[2], segments[3:]) if len(segments) > 2 else ("revision", [])
        revision = arguments[0] if arguments else "main"
        if action == "revision":
            self.reply(200, hub.info(repository, revision))
            return
        if action != "tree":
            raise HubError(404, None, f"no route {self.path}")
        recursive = query.get("recursive", "false").lower() == "true"
        entries = hub.tree(repository, revision, "/".join(arguments[1:]), recursive)
        start = int(query.get("cursor", "0"))
        end = start + hub.page_size
        headers = {}
        if end < len(entries):
            following = urllib.parse.urlencode({**query, "cursor": str(end)})
            path = urllib.parse.urlsplit(self.path).path
            headers["Link"] = f'<{hub.url}{path}?{following}>; rel="next"'
        self.reply(200, entries[start:end], headers)

    def resolve(
        self,
        hub: HubServer,
        repo_type: str,
        segments: list[str],
        token: str | None,
        send_body: bool,
    ) -> None:
        if len(segments) < 5 or segments[2] != "resolve":
            raise HubError(404, None, f"no route {self.path}")
        repository = hub.find(repo_type, "/".join(segments[:2]), token)
        hub.check_access(repository, token)
        sha = hub.commit_of(repository, segments[3])
        path = "/".join(segments[4:])
        content = repository.commits[sha].get(path)
        if content is None:
            raise HubError(404, "EntryNotFound", f"{path} does not exist", commit=sha)
        headers = {"X-Repo-Commit": sha}
        if not stored_with_lfs(path):
            headers["ETag"] = f'"{git_blob_id(content)}"'
            if send_body:
                hub.record_download(repository, path)
            self.send(200, content, "application/octet-stream", headers, send_body)
            return
        headers.update(
            {
                "ETag": f'"{git_blob_id(lfs_pointer(content))}"',
                "X-Linked-Etag": f'"{hashlib.sha256(content).hexdigest()}"',
                "X-Linked-Size": str(len(content)),
                "Location": hub.signed_url(repository, path, sha),
            }
        )
        self.send(302, b"", "text/plain", headers, send_body)

    def cdn(
        self, hub: HubServer, segments: list[str], query: dict[str, str], send_body: bool
    ) -> None:
        """The storage behind LFS redirects: anyone with a valid signed URL, no token."""
        repository = hub.repositories.get("/".join(segments[:3]))
        path = "/".join(segments[3:])
        sha = query.get("commit", "")
        expected = hub.signature(path, sha)
        if repository is None or not hmac.compare_digest(query.get("signature", ""), expected):
            raise HubError(403, None, "Request has expired or its signature is invalid")
        content = repository.commits[sha][path]
        if send_body:
            hub.record_download(repository, path)
        self.send(200, content, "application/octet-stream", {}, send_body)

    def reply(
        self,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
        send_body: bool = True,
    ) -> None:
        self.send(status, json.dumps(body).encode(), "application/json", headers or {}, send_body)

    def send(
        self,
        status: int,
        payload: bytes,
        content_type: str,
        headers: dict[str, str],
        send_body: bool,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(payload)
