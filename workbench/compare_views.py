"""Two runs side by side: the same prompt with different settings or models, each
pair of samples marked where it first diverges."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from completions.models import Generation
from core.shortcuts import int_or_404
from workbench.display import LEGEND, compare_pairs
from workbench.models import TRANSPORT_PARAMS

CANDIDATES = 20


def _finished(request: HttpRequest, value: str) -> Generation:
    return get_object_or_404(
        Generation.objects.terminal(),
        pk=int_or_404(value),
        owner=request.user,
        kind=Generation.Kind.WORKBENCH,
    )


def settings_rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any, bool]]:
    """(name, A's value, B's value, differs) for every setting either run sent."""
    names = sorted((a.keys() | b.keys()) - {"prompt", *TRANSPORT_PARAMS})
    return [(n, a.get(n), b.get(n), a.get(n) != b.get(n)) for n in names]


@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    """?a=<run>&b=<run>: the two side by side. With only ?a, the user's other finished
    runs of the same prompt to pick B from; with neither, recent runs to pick A from."""
    finished = Generation.objects.terminal().filter(
        owner=request.user, kind=Generation.Kind.WORKBENCH
    )
    a = _finished(request, request.GET["a"]) if request.GET.get("a") else None
    b = _finished(request, request.GET["b"]) if a is not None and request.GET.get("b") else None
    context: dict[str, Any] = {"a": a, "b": b, "token_legend": LEGEND}
    if a is None:
        context["candidates"] = finished.order_by("-pk")[:CANDIDATES]
    elif b is None:
        same = finished.filter(params__prompt=(a.params or {}).get("prompt")).exclude(pk=a.pk)
        context["candidates"] = same.order_by("-pk")[:CANDIDATES]
    else:
        prompt_a, prompt_b = (a.params or {}).get("prompt"), (b.params or {}).get("prompt")
        context.update(
            pairs=compare_pairs(a.choices or [], b.choices or []),
            settings=settings_rows(a.params or {}, b.params or {}),
            same_prompt=prompt_a == prompt_b,
            prompt=prompt_a if isinstance(prompt_a, str) else "",
        )
    return render(request, "workbench/compare.html", context)
