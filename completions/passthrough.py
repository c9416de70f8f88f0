"""The door's raw path for the public API: send a request to the backend a short id
routes to and hand back the open response, bytes untouched.

The pages use completions.client, which parses what comes back; the /v1 proxy must
pass bodies through verbatim (and full-vocabulary bodies without holding them in
memory), so it needs the response itself. Routing, the backend's key, its error
envelope and its transport failures are still decided here, in the door. One
httpx.AsyncClient (one connection pool) per event loop; no retries — a proxy reports
the backend's answer and the client decides (the seed's Retry-After / X-Should-Retry
tell it how).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
from django.conf import settings

from completions.answers import error_for_response
from completions.answers import transport_error as transport_error  # proxy's and jobs' too
from completions.client import get_model, route
from completions.errors import BackendError
from completions.pool import FlatTransport
from completions.routing import Route
from completions.schema import ModelInfo

ROUTE_CACHE_SECONDS = 2.0  # in-process; the shared cache behind it holds the listing 30 s
ROUTE_STALE_SECONDS = 60.0  # past fresh, still answered while a refresh runs


@dataclass(frozen=True)
class Target:
    """Where one short id goes: the model's card and its backend."""

    model: ModelInfo
    url: str  # API base, ending in /v1
    api_key: str
    upstream: str | None  # the backend's own name for the model (None: leave it as sent)
    backend: str  # the backend's name, for X-Acs-Upstream-Gpu and logs


_clients: dict[int, httpx.AsyncClient] = {}
_transports: dict[int, FlatTransport] = {}  # each client's, for open_completion
_targets: dict[str | None, tuple[float, Target]] = {}
_refreshing: dict[str | None, asyncio.Task] = {}


def http() -> httpx.AsyncClient:
    loop = id(asyncio.get_running_loop())
    client = _clients.get(loop)
    if client is None:
        transport = _transports[loop] = FlatTransport(
            httpx.Limits(max_connections=512, max_keepalive_connections=128)
        )
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=settings.WEFT_BACKEND_CONNECT_TIMEOUT,
                read=settings.WEFT_BACKEND_READ_TIMEOUT,
                write=settings.WEFT_BACKEND_READ_TIMEOUT,
                pool=settings.WEFT_BACKEND_CONNECT_TIMEOUT,
            ),
            transport=transport,
        )
        _clients[loop] = client
    return client


async def close_client() -> None:
    _transports.pop(id(asyncio.get_running_loop()), None)
    client = _clients.pop(id(asyncio.get_running_loop()), None)
    if client is not None:
        await client.aclose()


async def target(model_id: str | None) -> Target:
    """The route for a short id (None: the default); raises ModelNotFound or
    BackendUnavailable. Asked on every request, so it is kept in-process: fresh for
    ROUTE_CACHE_SECONDS, then still answered from memory while a background refresh
    looks again (a re-pointed alias takes effect a moment later, and no request waits
    for a models listing once the first one is in)."""
    now = time.monotonic()
    hit = _targets.get(model_id)
    if hit is not None:
        age = now - hit[0]
        if age < ROUTE_CACHE_SECONDS:
            return hit[1]
        if age < ROUTE_STALE_SECONDS:
            _resolving(model_id)
            return hit[1]
    # Shielded: one waiter cancelled (its client gone) must not cancel the others'.
    return await asyncio.shield(_resolving(model_id))


def _resolving(model_id: str | None) -> asyncio.Task[Target]:
    """The one lookup of this id in flight on this loop, started if there is none: a
    burst that finds the route missing or stale makes one lookup, not one each."""
    task = _refreshing.get(model_id)
    if task is None or task.get_loop() is not asyncio.get_running_loop():
        task = asyncio.ensure_future(_resolve(model_id))
        _refreshing[model_id] = task
        task.add_done_callback(partial(_resolved, model_id))
    return task


def _resolved(model_id: str | None, task: asyncio.Task[Target]) -> None:
    if _refreshing.get(model_id) is task:
        del _refreshing[model_id]
    if not task.cancelled():
        task.exception()  # a refresh nobody awaits: the next request sees the error itself


async def _resolve(model_id: str | None) -> Target:
    # In a thread: the door's model table is read from Django's cache with the sync
    # Redis client (and, in the event loop, on a new connection each time, Django's
    # cache being per task), which would stall every stream in this process for those
    # round trips — a refresh starts with the first request of a burst. One hop per
    # refresh, never per request.
    try:
        model, to = await asyncio.to_thread(_lookup, model_id)
    except BackendError:
        _targets.pop(model_id, None)
        raise
    found = Target(model, to.backend.url, to.backend.api_key, to.upstream, to.backend.name)
    _targets[model_id] = (time.monotonic(), found)
    return found


def _lookup(model_id: str | None) -> tuple[ModelInfo, Route]:
    model = get_model(model_id)
    return model, route(model.id)


def forget_targets() -> None:
    _targets.clear()


def _headers(to: Target, workload: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    if workload:
        headers["X-Acs-Workload"] = workload
    if to.api_key:
        headers["Authorization"] = f"Bearer {to.api_key}"
    return headers


async def open_completion(
    to: Target, body: dict[str, Any], *, workload: str = "", raw: bytes | None = None
) -> httpx.Response:
    """POST /completions to the target's backend; returns the open 2xx response (the
    caller reads and closes it). A 4xx/5xx answer or a transport failure raises the
    door's typed BackendError."""
    if to.upstream is not None and body.get("model") != to.upstream:
        body = {**body, "model": to.upstream}
        raw = None
    client = http()
    # Straight to the pool: the client's cookie jar, auth and redirect handling cost
    # ~0.1 ms a request and a backend's completion needs none of them.
    request = httpx.Request(
        "POST",
        f"{to.url}/completions",
        content=raw if raw is not None else None,
        json=body if raw is None else None,
        headers=_headers(to, workload),
        extensions={"timeout": client.timeout.as_dict()},
    )
    try:
        response = await _transports[id(asyncio.get_running_loop())].handle_async_request(request)
    except httpx.HTTPError as exc:
        raise transport_error(exc) from exc
    response.request = request
    if response.status_code >= 400:
        try:
            await response.aread()
        except httpx.HTTPError as exc:
            raise transport_error(exc) from exc
        finally:
            await response.aclose()
        raise error_for_response(response)
    return response


async def count_tokens(to: Target, prompts: list[str | list[int]]) -> list[int] | None:
    """Exact token counts per prompt via the backend's /tokenize; None when it has none."""
    counts: list[int] = []
    for prompt in prompts:
        if isinstance(prompt, list):
            counts.append(len(prompt))
            continue
        try:
            response = await http().post(
                f"{to.url.removesuffix('/v1')}/tokenize",
                json={"model": to.upstream or to.model.id, "prompt": prompt},
                headers=_headers(to, ""),
            )
            if response.status_code >= 400:
                return None
            data = response.json()
            counts.append(int(data["count"]) if "count" in data else len(data["tokens"]))
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
    return counts
