"""A tree's open pages, live: every page of a tree joins the tree's Channels group
(loom/consumers.py), and every change to the tree publishes one small event there
once its transaction commits — which nodes it touched, who made it and from which
page (the page's id stays on the server: each socket is told whether an event is its
own), so that page ignores its own echo and the others re-read only the fragments
that show those nodes (static/weft/loomlive.js). Events carry ids and a username,
never node text: the pages fetch the fragments, which escape it server-side.

Who is acting comes from the request (OriginMiddleware: the user and the page's
X-Weft-Client header) or, in a worker, from the generation's owner (`acting`).

Presence (who has the tree open, on which node) lives in a Redis hash per tree, one
field per socket with a timestamp, so every web process sees every page and a
process that dies leaves entries that simply age out."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from django.db import transaction

from completions.streaming import publish_soon


class Origin(NamedTuple):
    user_id: int | None
    name: str
    client: str


_ORIGIN: ContextVar[Origin | None] = ContextVar("loom_origin", default=None)
CLIENT_HEADER = "HTTP_X_WEFT_CLIENT"


def group(tree_id: int) -> str:
    return f"loom-tree-{tree_id}"


def origin() -> Origin | None:
    return _ORIGIN.get()


@contextmanager
def acting(user_id: int | None, name: str = "", client: str = "") -> Iterator[None]:
    """Attribute what is published (and logged for undo) inside to this user."""
    token = _ORIGIN.set(Origin(user_id, name, client[:64]))
    try:
        yield
    finally:
        _ORIGIN.reset(token)


class OriginMiddleware:
    """Remembers, for the request, who acts and from which page (the page's own id,
    sent by loomlive.js on every htmx request)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return self.get_response(request)
        client = str(request.META.get(CLIENT_HEADER, ""))
        with acting(user.pk, user.get_username(), client):
            return self.get_response(request)


def _ids(values: Iterable[Any]) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            out.append(v)
        elif isinstance(v, list | tuple):
            out.extend(_ids(v))
    return sorted(set(out))


def node_ids(data: dict[str, Any]) -> list[int]:
    """The node ids an undo record names (node, focus, parent, tail, nodes, …),
    nested steps and deleted rows included."""
    found: list[Any] = []
    for key in ("node", "focus", "parent", "tail", "nodes", "children", "focus_back", "to"):
        found.append(data.get(key))
    for row in data.get("rows") or []:
        if isinstance(row, dict):
            found += [row.get("id"), row.get("parent_id")]
    if isinstance(data.get("row"), dict):
        found += [data["row"].get("id"), data["row"].get("parent_id")]
    for step in data.get("steps") or []:
        if isinstance(step, dict) and isinstance(step.get("data"), dict):
            found += node_ids(step["data"])
    return _ids(found)


def publish(tree_id: int, event: str, ids: Iterable[int] = (), **data: Any) -> None:
    """Tell the tree's open pages, once the current transaction commits (a rolled
    back change tells nobody)."""
    who = origin()
    message = {
        "type": "tree.event",
        "event": event,
        "ids": _ids(ids),
        "by": who.user_id if who else None,
        "name": who.name if who else "",
        "client": who.client if who else "",
        **data,
    }
    transaction.on_commit(lambda: publish_soon(group(tree_id), message))


def access_changed(tree_id: int, user_id: int | None) -> None:
    """Sockets of `user_id` (None: everyone's) on the tree re-check their role: the
    tree's, and those watching a generation the tree grows (its text is the tree's)."""
    message = {"type": "access.changed", "user_id": user_id}

    def tell() -> None:
        from completions.models import Generation
        from completions.streaming import group_name

        publish_soon(group(tree_id), message)
        running = Generation.objects.filter(kind="loom", target__tree=tree_id).exclude(
            state__in=Generation.TERMINAL
        )
        for generation_id in running.values_list("pk", flat=True):
            publish_soon(group_name(generation_id), message)

    transaction.on_commit(tell)


# --- presence ------------------------------------------------------------------------

PRESENCE_TTL = 60  # seconds a page counts as present after its last word
PRESENCE_COLOURS = 8


def presence_key(tree_id: int) -> str:
    return f"weft:loom-presence:{tree_id}"


class Present(NamedTuple):
    user_id: int
    name: str
    node: int | None
    at: float

    @property
    def initials(self) -> str:
        parts = [p for p in self.name.replace("_", " ").replace(".", " ").split() if p]
        if len(parts) >= 2:
            return (parts[0][0] + parts[1][0]).upper()
        return self.name[:2].upper()


def present_people(raw: dict[Any, Any], *, exclude: str = "", now: float | None = None) -> list:
    """One entry per user (their most recent page), fresh ones only, as dicts for the page."""
    import orjson

    now = time.time() if now is None else now
    best: dict[int, Present] = {}
    for field, value in raw.items():
        key = field.decode() if isinstance(field, bytes) else str(field)
        if key == exclude:
            continue
        try:
            p = Present(*orjson.loads(value))
        except (ValueError, TypeError):
            continue
        if now - p.at > PRESENCE_TTL:
            continue
        if p.user_id not in best or best[p.user_id].at < p.at:
            best[p.user_id] = p
    return [
        {"user": p.user_id, "name": p.name, "initials": p.initials, "node": p.node,
         "colour": p.user_id % PRESENCE_COLOURS}
        for p in sorted(best.values(), key=lambda p: p.name)
    ]  # fmt: skip
