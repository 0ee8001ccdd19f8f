"""The Files and Batches API of the local server (tests/chat_server.py), with faults on cue.

A batch moves one step each time it is retrieved: `validating`, then `in_progress`, then, on the
next look, every request in its input file is answered as a chat request would be ("T:" + the
last user message) and the batch is `completed`, with an output file (and an error file for
requests that failed). Faults, taken by batches in the order they are created
(`server.batches.script(...)`):

- `FAIL`: the batch ends `failed`, with no output at all;
- `EXPIRE_HALF`: the batch ends `expired` with the first half of its requests answered, the rest
  in its error file as `batch_expired`;
- `ERROR_FIRST`: the batch completes, but its first request failed (a 500 in the error file).

`drop_next_retrieve` closes the connection of the next retrieve without a reply (a lost
connection while polling); `hang_creates` holds every create after making the batch (a client
killed between sending the create and reading the reply), and `drop_next_create` closes the
connection of the next create after making its batch (a reply lost on the way). Every answered
prompt is recorded, so that tests can check that none was answered (billed) twice.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

FAIL = "fail"
EXPIRE_HALF = "expire_half"
ERROR_FIRST = "error_first"


def last_user_message(body: Any) -> str | None:
    messages = body.get("messages", []) if isinstance(body, dict) else []
    users = [message.get("content") for message in messages if message.get("role") == "user"]
    return users[-1] if users else None


@dataclass
class BatchAPI:
    """The server's files and batches; every method is called from handler threads."""

    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    answered_prompts: list[str | None] = field(default_factory=list)
    drop_next_retrieve: bool = False
    hang_creates: bool = False
    drop_next_create: bool = False
    retrieves: int = 0
    _faults: deque[str | None] = field(default_factory=deque)
    _batch_faults: dict[str, str | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *faults: str | None) -> None:
        """Faults for the next batches created, in order (None: no fault)."""
        with self._lock:
            self._faults.extend(faults)

    def upload(self, content_type: str, payload: bytes) -> dict[str, Any]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + payload
        )
        parts = {
            part.get_param("name", header="content-disposition"): part
            for part in message.iter_parts()
        }
        content = parts["file"].get_payload(decode=True)
        assert isinstance(content, bytes), "the upload has no file part"
        with self._lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = content
        return self._file_object(file_id, content)

    def content(self, file_id: str) -> bytes | None:
        with self._lock:
            return self.files.get(file_id)

    def create(self, body: dict[str, Any]) -> dict[str, Any] | str:
        """The new batch, or why it cannot be made."""
        with self._lock:
            if body.get("input_file_id") not in self.files:
                return f"no file {body.get('input_file_id')}"
            batch_id = f"batch-{len(self.batches) + 1}"
            self._batch_faults[batch_id] = self._faults.popleft() if self._faults else None
            lines = self.files[body["input_file_id"]].decode().splitlines()
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body.get("endpoint"),
                "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window"),
                "status": "validating",
                "created_at": 0,
                "metadata": body.get("metadata"),
                "output_file_id": None,
                "error_file_id": None,
                "errors": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            }
            return dict(self.batches[batch_id])

    def retrieve(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            self.retrieves += 1
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            if batch["status"] == "validating":
                batch["status"] = "in_progress"
            elif batch["status"] == "in_progress":
                self._finish(batch, self._batch_faults[batch_id])
            return dict(batch)

    def listing(self) -> dict[str, Any]:
        with self._lock:
            data = [dict(batch) for batch in reversed(self.batches.values())]
        return {"object": "list", "data": data, "has_more": False}

    def _finish(self, batch: dict[str, Any], fault: str | None) -> None:
        if fault == FAIL:
            batch["status"] = "failed"
            batch["errors"] = {"object": "list", "data": [{"code": "injected", "message": "no"}]}
            return
        requests = [json.loads(line) for line in self.files[batch["input_file_id"]].splitlines()]
        answered = len(requests) // 2 if fault == EXPIRE_HALF else len(requests)
        outputs, errors = [], []
        for position, request in enumerate(requests):
            if position >= answered:
                errors.append(_error_line(request, 0, "batch_expired", "not answered in time"))
            elif fault == ERROR_FIRST and position == 0:
                errors.append(_error_line(request, 500, "server_error", "injected failure"))
            else:
                outputs.append(_output_line(request))
                self.answered_prompts.append(last_user_message(request["body"]))
        batch["status"] = "expired" if fault == EXPIRE_HALF else "completed"
        batch["request_counts"] = {
            "total": len(requests),
            "completed": len(outputs),
            "failed": len(errors),
        }
        for name, lines in (("output_file_id", outputs), ("error_file_id", errors)):
            if lines:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = "".join(json.dumps(line) + "\n" for line in lines).encode()
                batch[name] = file_id

    @staticmethod
    def _file_object(file_id: str, content: bytes) -> dict[str, Any]:
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": 0,
            "filename": "input.jsonl",
            "purpose": "batch",
            "status": "processed",
        }


def _output_line(request: dict[str, Any]) -> dict[str, Any]:
    # The chat server's own completion, so that batch and online answers are the same.
    from .chat_server import Request, completion_body, default_answer

    chat = Request("POST", request["url"], {}, request["body"])
    message = {"role": "assistant", "content": default_answer(chat)}
    body = completion_body(chat, message)
    return {
        "id": f"response-{request['custom_id']}",
        "custom_id": request["custom_id"],
        "response": {"status_code": 200, "request_id": "req", "body": body},
        "error": None,
    }


def _error_line(request: dict[str, Any], status: int, code: str, message: str) -> dict[str, Any]:
    error = {"code": code, "message": message}
    if status:
        response = {"status_code": status, "request_id": "req", "body": {"error": error}}
        return {"id": "e", "custom_id": request["custom_id"], "response": response, "error": None}
    return {"id": "e", "custom_id": request["custom_id"], "response": None, "error": error}
