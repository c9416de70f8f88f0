"""History (saved runs), Recover (unsaved checkpoints) and export."""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from completions.budget import BudgetRefused
from completions.errors import BackendError
from completions.models import Generation
from completions.registry import saved_result_context
from completions.schema import ParamsInvalid
from core.downloads import download
from core.forms import first_error
from core.shortcuts import HtmxRequest
from workbench.display import LEGEND, run_choices, sample_views
from workbench.forms import HistoryFilterForm
from workbench.models import Run, Sample
from workbench.views import KINDS

PAGE_SIZE = 20
EXPORT_CHUNK = 200


def _filter_form(request: HttpRequest) -> HistoryFilterForm:
    return HistoryFilterForm(request.GET)


def _filters(request: HttpRequest) -> dict:
    return _filter_form(request).filters()


@require_GET
def history(request: HtmxRequest) -> HttpResponse:
    form = _filter_form(request)
    filters = form.filters()
    runs = (
        Run.objects.for_user(request.user)
        .filtered(**filters)
        .annotate(sample_count=Count("samples"))
        # An aggregate drops Meta.ordering; pages need a stable order.
        .order_by("-saved_at", "-pk")
    )
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    query_string = urlencode(
        {k: v for k, v in request.GET.items() if k != "page" and isinstance(v, str) and v},
        doseq=False,
    )
    context = {
        "page": page,
        "filters": filters,
        "filter_error": first_error(form),
        "query_string": query_string,
        "models": Run.objects.for_user(request.user)
        .exclude(model="")
        .order_by("model")
        .values_list("model", flat=True)
        .distinct(),
        "recoverable": Generation.objects.recoverable(request.user).filter(kind__in=KINDS).count(),
    }
    template = "workbench/history.html"
    if request.htmx and request.htmx.target == "history-results":
        template += "#results"
    return render(request, template, context)


@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id, owner=request.user)
    context = {
        "run": run,
        "samples": sample_views(run_choices(run), usage=run.usage),
        "prompt": run.params.get("prompt") if isinstance(run.params.get("prompt"), str) else "",
        "echo": bool(run.params.get("echo")),
        "settings": {k: v for k, v in run.params.items() if k != "prompt"},
        "token_legend": LEGEND,
        # "Branch from here" on this page opens the Workbench with this run's settings.
        "workbench_url": f"{reverse('workbench')}?run={run.pk}",
    }
    context.update(saved_result_context(run.kind, run.result))
    return render(request, "workbench/run_detail.html", context)


@require_POST
def run_rerun(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id, owner=request.user)
    try:
        generation = run.rerun()
    except (ParamsInvalid, BudgetRefused, BackendError) as exc:
        messages.error(request, f"Could not run it again: {getattr(exc, 'message', exc)}")
        return redirect("wb_run_detail", run.pk)
    return redirect(f"{reverse('workbench')}?generation={generation.pk}")


@require_POST
def run_delete(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id, owner=request.user)
    run.delete()
    messages.info(request, "Deleted from History.")
    return redirect("history")


@require_GET
def recover(request: HttpRequest) -> HttpResponse:
    generations = Generation.objects.recoverable(request.user).filter(kind__in=KINDS)
    page = Paginator(generations, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "workbench/recover.html", {"page": page})


# --------------------------------------------------------------------------- export

# Exports stream: runs and samples are read with .iterator() in chunks and written
# as they come, so a large history never sits in memory.


def _jsonl(samples: QuerySet[Sample]) -> Iterator[str]:
    for sample in samples.iterator(chunk_size=EXPORT_CHUNK):
        yield json.dumps(sample.export_line(), ensure_ascii=False) + "\n"


def _json(runs: QuerySet[Run]) -> Iterator[str]:
    yield "["
    first = True
    for run in runs.prefetch_related("samples").iterator(chunk_size=EXPORT_CHUNK):
        yield ("\n" if first else ",\n") + json.dumps(run.export_dict(), ensure_ascii=False)
        first = False
    yield "\n]\n"


@require_GET
def export_history(request: HttpRequest, fmt: str) -> StreamingHttpResponse:
    runs = (
        Run.objects.for_user(request.user).filtered(**_filters(request)).order_by("saved_at", "pk")
    )
    return _export(request, runs, "weft-history", fmt)


@require_GET
def export_run(request: HttpRequest, run_id: int, fmt: str) -> StreamingHttpResponse:
    run = get_object_or_404(Run, pk=run_id, owner=request.user)
    return _export(request, Run.objects.filter(pk=run.pk), f"weft-run-{run.pk}", fmt)


def _export(
    request: HttpRequest, runs: QuerySet[Run], name: str, fmt: str
) -> StreamingHttpResponse:
    if fmt not in ("json", "jsonl"):
        raise Http404
    if fmt == "jsonl":
        samples = (
            Sample.objects.filter(run__in=runs)
            .select_related("run")
            .order_by("run__saved_at", "run_id", "index")
        )
        return download(request, _jsonl(samples), f"{name}.jsonl", "application/x-ndjson")
    return download(request, _json(runs), f"{name}.json", "application/json")
