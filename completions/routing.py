"""Which backend a model id goes to.

An operator lists vLLM-compatible backends in WEFT_BACKENDS (README: Model routing);
with none listed the one backend is WEFT_BACKEND_URL (the local engine by default),
exactly as before routing existed. Each backend's models are reachable under short
ids — the ids it lists itself, or the aliases its "models" map gives — and the merged
list has exactly one default (WEFT_DEFAULT_MODEL when it is listed, else the first
backend's own default, else the first model). Short ids are routing aliases: the
request goes out with the backend's own model name, and the response's `model` is
whatever checkpoint the backend says served it.

This module is pure (no HTTP): completions.client fetches each backend's listing and
caches the merged Table.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from dataclasses import dataclass

from django.conf import settings

from completions.errors import BackendUnavailable, ModelNotFound
from completions.schema import ModelInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backend:
    name: str  # for logs (it defaults to the hostname: never in a message); never the key
    url: str  # the API base, ending in /v1
    api_key: str = ""
    # (short id, the backend's model name) pairs; None: every model it lists, as listed.
    models: tuple[tuple[str, str], ...] | None = None

    @property
    def root(self) -> str:
        """The server's root (for /health and /tokenize): the API URL without /v1."""
        return self.url.removesuffix("/v1")

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        return f"Backend({self.name!r}, {self.url!r})"


@dataclass(frozen=True)
class Route:
    model_id: str | None  # the short id asked for (None: the default)
    upstream: str | None  # the model name sent to the backend (None: leave it out)
    backend: Backend


@dataclass(frozen=True)
class Table:
    """The merged models list and where each short id goes."""

    models: tuple[ModelInfo, ...]
    routes: dict[str, Route]
    down: tuple[str, ...] = ()  # backends that did not answer their /v1/models

    def route(self, model_id: str | None) -> Route:
        """The route for a short id (None: the default); raises ModelNotFound, or
        BackendUnavailable when the id may belong to a backend that is down."""
        if model_id is None:
            model_id = next((m.id for m in self.models if m.default), None)
        route = self.routes.get(model_id) if model_id is not None else None
        if route is not None:
            return route
        if self.down:
            # A backend's name defaults to its hostname: the log says which are down,
            # the message (which reaches API clients and pages) only the model's id.
            log.warning("model %s: not served while backends are down: %s", model_id,
                        ", ".join(self.down))  # fmt: skip
            raise BackendUnavailable(
                "backend_unavailable", f"backend unavailable for model '{model_id}'", 503
            )
        if model_id is None:
            raise ModelNotFound(message="the backend lists no models")
        raise ModelNotFound(message=f"the backend has no model '{model_id}'")


def backends() -> list[Backend]:
    """The configured backends, read from settings on every call (tests change them)."""
    entries = settings.WEFT_BACKENDS
    local_url = settings.WEFT_BACKEND_URL.rstrip("/")
    if not entries:
        return [Backend("local", local_url, settings.WEFT_BACKEND_API_KEY)]
    out = []
    for entry in entries:
        is_local = entry["url"] == "local"
        models = entry.get("models")
        out.append(
            Backend(
                name=entry["name"],
                url=local_url if is_local else entry["url"],
                api_key=entry["api_key"] or (settings.WEFT_BACKEND_API_KEY if is_local else ""),
                models=tuple(models.items()) if models else None,
            )
        )
    return out


def direct_route(model_id: str | None) -> Route | None:
    """The route when no listing is needed: one backend that serves its models under
    their own names (the default set-up). The request then goes out unchanged."""
    only = backends()
    if len(only) == 1 and only[0].models is None:
        return Route(model_id, model_id, only[0])
    return None


def fingerprint() -> str:
    """Changes whenever the routing configuration does (cache keys depend on it)."""
    parts = [(b.name, b.url, b.models, hashlib.sha256(b.api_key.encode()).hexdigest()[:8])
             for b in backends()]  # fmt: skip
    raw = repr((parts, settings.WEFT_DEFAULT_MODEL))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def merge(listings: list[tuple[Backend, list[ModelInfo] | None]]) -> Table:
    """One Table from each backend's listing (None: it did not answer). The first
    backend to claim a short id keeps it."""
    models: list[ModelInfo] = []
    routes: dict[str, Route] = {}
    down: list[str] = []
    own_default: str | None = None
    for backend, listed in listings:
        if listed is None:
            down.append(backend.name)
            continue
        by_name = {m.id: m for m in listed}
        if backend.models is None:
            exposed = [(m.id, m.id) for m in listed]
        else:
            exposed = list(backend.models)
        for short_id, upstream in exposed:
            if short_id in routes:
                continue
            card = by_name.get(upstream)
            if card is None:  # an alias the backend does not serve (any more)
                continue
            if own_default is None and card.default:
                own_default = short_id
            info = dataclasses.replace(card, id=short_id, root=card.root or upstream)
            models.append(info)
            routes[short_id] = Route(short_id, upstream, backend)
    chosen: str | None = settings.WEFT_DEFAULT_MODEL
    if chosen not in routes:
        if chosen and models:
            log.warning("WEFT_DEFAULT_MODEL=%s is not served now; the default falls back", chosen)
        chosen = own_default or (models[0].id if models else None)
    models = [dataclasses.replace(m, default=m.id == chosen) for m in models]
    return Table(tuple(models), routes, tuple(down))
