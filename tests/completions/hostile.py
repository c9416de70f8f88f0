"""A real HTTP backend that answers exactly what a test tells it to: headers and bodies
the scripted engine never sends (over-long ids, odd Retry-After values, NULs, bad shapes).
It speaks just enough of the API for the door: /health, /v1/models and
/v1/completions (JSON or SSE); /tokenize is missing, as on the seed's hosted API."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_CARD = {"id": "hostile", "object": "model", "root": "x/hostile", "max_model_len": 2048}


class Answer:
    """One scripted answer: a status, headers, and a JSON body or SSE frames."""

    def __init__(
        self,
        status: int = 200,
        headers: dict[str, str] | None = None,
        body: Any = None,
        frames: list[Any] | None = None,
    ) -> None:
        self.status = status
        self.headers = headers or {}
        self.body = body
        self.frames = frames


class HostileBackend:
    def __init__(self) -> None:
        self.answer = Answer()
        self.seen: list[dict[str, Any]] = []
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    body = {"object": "list", "data": [{**MODEL_CARD, "default": True}]}
                    self._send(200, {"Content-Type": "application/json"}, json.dumps(body).encode())
                else:
                    self._send(200 if self.path == "/health" else 404, {}, b"{}")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                backend.seen.append({"path": self.path, "headers": dict(self.headers), "raw": raw})
                if self.path != "/v1/completions":
                    self._send(404, {"Content-Type": "application/json"}, b"{}")
                    return
                answer = backend.answer
                if answer.frames is not None:
                    payload = b"".join(
                        b"data: "
                        + (f if isinstance(f, bytes) else json.dumps(f).encode())
                        + b"\n\n"
                        for f in answer.frames
                    )
                    headers = {"Content-Type": "text/event-stream", **answer.headers}
                else:
                    payload = (
                        answer.body
                        if isinstance(answer.body, bytes)
                        else json.dumps(answer.body).encode()
                    )
                    headers = {"Content-Type": "application/json", **answer.headers}
                self._send(answer.status, headers, payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def choice_frame(text: str, index: int = 0, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "model": "hostile",
        "choices": [{"index": index, "text": text, "finish_reason": finish, "logprobs": None}],
    }
