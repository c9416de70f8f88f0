"""Hooks per kind of run: how it shows its result, and how a worker runs it.

Apps call register_result(kind, render) in AppConfig.ready(). Every page's final
fragment loads /generations/<id>/result/ (completions.views.generation_result),
which checks ownership once (or, for a kind that registered register_watchers, that
the user may watch it) and hands the generation to its kind's renderer.

register_executor(kind, run) lets an app run its kind its own way once the door's
scheduler has claimed it (the API's jobs pass the backend's bytes through verbatim);
kinds without one are streamed by completions.pipeline. `run(generation, run_token)`
must end the run with completions.lifecycle.finish under that token.

History (the workbench app) keeps a saved run of any kind: register_history(save) is
how it takes one (the page apps never import each other), and
register_saved_result(kind, context) what a kind's stored result adds to its History
entry's page (Inspect's token table).

register_lease_check(check) tells the door's release sweep which /v1 requests still
have a live process (the API's leases in Redis): `check([(key_id, request_id), ...])`
returns the request ids still held; without one, every request counts as held."""

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

Renderer = Callable[[HttpRequest, Any], HttpResponse]
Executor = Callable[[Any, str], None]
Watchers = Callable[[Any, Any], bool]
_RENDERERS: dict[str, Renderer] = {}
_EXECUTORS: dict[str, Executor] = {}
_WATCHERS: dict[str, Watchers] = {}
HistorySaver = Callable[..., Any]
SavedResult = Callable[[dict[str, Any]], dict[str, Any]]
_HISTORY: list[HistorySaver] = []
_SAVED_RESULTS: dict[str, SavedResult] = {}

LeaseCheck = Callable[[list[tuple[int, str]]], set[str]]
_LEASE_CHECK: list[LeaseCheck] = []


def register_lease_check(check: LeaseCheck) -> None:
    _LEASE_CHECK[:] = [check]


def leases_alive(requests: list[tuple[int, str]]) -> set[str]:
    if not _LEASE_CHECK:  # nothing can tell a dead process from a live one: keep them
        return {request_id for _, request_id in requests}
    return _LEASE_CHECK[0](requests)


def register_watchers(kind: str, may_watch: Watchers) -> None:
    """Who besides its owner may watch a run of this kind stream, and read its result
    (the Loom: whoever may read the tree it grows). `may_watch(user, generation)`."""
    _WATCHERS[kind] = may_watch


def may_watch(user: Any, generation: Any) -> bool:
    if generation.owner_id == user.pk:
        return True
    check = _WATCHERS.get(generation.kind)
    return bool(check and check(user, generation))


def register_executor(kind: str, run: Executor) -> None:
    _EXECUTORS[kind] = run


def executor(kind: str) -> Executor | None:
    return _EXECUTORS.get(kind)


def register_result(kind: str, renderer: Renderer) -> None:
    _RENDERERS[kind] = renderer


def unregister_result(kind: str) -> None:
    _RENDERERS.pop(kind, None)


def render_result(request: HttpRequest, generation: Any) -> HttpResponse:
    renderer = _RENDERERS.get(generation.kind)
    if renderer is not None:
        return renderer(request, generation)
    return render(request, "completions/_result.html", {"generation": generation})


def register_history(save: HistorySaver) -> None:
    """`save(generation, *, title, result, also)`: keep a finished run in History."""
    _HISTORY[:] = [save]


def save_to_history(generation: Any, **fields: Any) -> Any:
    if not _HISTORY:
        raise LookupError("no History app is installed")
    return _HISTORY[0](generation, **fields)


def register_saved_result(kind: str, context: SavedResult) -> None:
    _SAVED_RESULTS[kind] = context


def saved_result_context(kind: str, result: dict[str, Any] | None) -> dict[str, Any]:
    """What a saved run's stored result adds to its History page ({} for most kinds)."""
    context = _SAVED_RESULTS.get(kind)
    return context(result) if context is not None and result else {}


def result_url(generation: Any) -> str:
    return reverse("generation_result", args=[generation.pk])
