"""How each kind of generation shows its result: one hook per kind.

Apps call register_result(kind, render) in AppConfig.ready(). Every page's final
fragment loads /generations/<id>/result/ (completions.views.generation_result),
which checks ownership once and hands the generation to its kind's renderer."""

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

Renderer = Callable[[HttpRequest, Any], HttpResponse]
_RENDERERS: dict[str, Renderer] = {}


def register_result(kind: str, renderer: Renderer) -> None:
    _RENDERERS[kind] = renderer


def unregister_result(kind: str) -> None:
    _RENDERERS.pop(kind, None)


def render_result(request: HttpRequest, generation: Any) -> HttpResponse:
    renderer = _RENDERERS.get(generation.kind)
    if renderer is not None:
        return renderer(request, generation)
    return render(request, "completions/_result.html", {"generation": generation})


def result_url(generation: Any) -> str:
    return reverse("generation_result", args=[generation.pk])
