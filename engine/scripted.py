"""The scripted backend's test hooks: faults (per request header, queued, server-wide)
and a log of the requests received. Only mounted with ``--backend scripted``."""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.faults import Fault, parse_fault
from engine.http import api_errors, read_json
from engine.protocol import ApiError

RECENT_REQUESTS = 200


@dataclass
class ScriptedHooks:
    server_fault: Fault | None = None
    fault_queue: deque[tuple[dict[str, Any], Fault]] = field(default_factory=deque)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_REQUESTS))

    async def record(self, request: Request) -> None:
        """Remember what was received, for tests."""
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.recent.append(
            {
                "time": time.time(),
                "method": request.method,
                "path": request.url.path,
                "headers": dict(request.headers),
                "body": body,
                "raw": raw.decode("utf-8", errors="replace"),
            }
        )

    def take_fault(self, request: Request) -> Fault | None:
        """Header fault, else the next queued one, else the server-wide one."""
        header = request.headers.get("x-scripted-fault")
        if header:
            return parse_fault(header)
        if self.fault_queue:
            return self.fault_queue.popleft()[1]
        return self.server_fault

    def routes(self) -> list[Route]:
        @api_errors
        async def queue_faults(request: Request) -> Response:
            if request.method == "DELETE":
                self.fault_queue.clear()
            elif request.method == "POST":
                body = await read_json(request)
                raw = body.get("faults") if isinstance(body, dict) else None
                if not isinstance(raw, list):
                    raise ApiError('expected {"faults": [{...}, ...]}', param="faults")
                parsed = [(f, parse_fault(f)) for f in raw]  # all or nothing
                self.fault_queue.extend(parsed)
            return JSONResponse(
                {"queued": len(self.fault_queue), "faults": [f for f, _ in self.fault_queue]}
            )

        async def recent_requests(request: Request) -> Response:
            if request.method == "DELETE":
                self.recent.clear()
            return JSONResponse({"requests": list(self.recent)})

        return [
            Route("/_scripted/faults", queue_faults, methods=["GET", "POST", "DELETE"]),
            Route("/_scripted/requests", recent_requests, methods=["GET", "DELETE"]),
        ]
