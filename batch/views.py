"""The Batch page: upload prompts with the Workbench's parameter form, watch the
progress, page through the results, export them. Every batch is looked up with
owner=request.user, so someone else's id is a 404."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from batch import charts, exports, feeding
from batch.models import Batch, BatchItem
from batch.uploads import FORMATS, MAX_PROMPTS, UploadError, detect, parse
from completions import kit
from completions.budget import usage_summary
from completions.client import list_models
from completions.errors import BackendError
from completions.forms import lookup_model
from completions.models import Generation
from completions.schema import ParamsInvalid
from core.shortcuts import HtmxRequest
from loom.generation import attach
from loom.models import Author, Tree

LIST = "batch/list.html"
DETAIL = "batch/detail.html"
PAGE_SIZE = 25


def _own(request: HtmxRequest, batch_id: int) -> Batch:
    return get_object_or_404(Batch, pk=batch_id, owner=request.user)


def _form_context(request: HtmxRequest, values: dict[str, Any]) -> dict[str, Any]:
    try:
        models, model_error = list_models(), ""
    except BackendError as exc:
        models, model_error = [], f"The backend cannot be reached ({exc.code}): {exc.message}"
    return {
        **kit.params_context(values, models, model_error),
        "batches": [(b, b.progress()) for b in Batch.objects.filter(owner_id=request.user.pk)[:50]],
        "budget": usage_summary(request.user),
        "formats": FORMATS,
        "max_prompts": MAX_PROMPTS,
    }


@require_GET
def batch_list(request: HtmxRequest) -> HttpResponse:
    return render(request, LIST, _form_context(request, kit.form_values({})))


@require_POST
def batch_new(request: HtmxRequest) -> HttpResponse:
    """Upload: parse the file, check every prompt and the whole batch's worst case,
    then create it all in one transaction. Any error: nothing is created or sent."""
    values = kit.form_values({})
    values.update({k: v for k, v in request.POST.items() if k in values})
    for param in kit.PARAMS:  # an unticked checkbox is absent from the POST
        if param.kind == "bool" and f"{param.name}__present" in request.POST:
            values[param.name] = param.name in request.POST
    context = _form_context(request, values)
    context["title"] = request.POST.get("title", "")

    def refuse(*errors: str, refusal: Any = None) -> HttpResponse:
        context.update(errors=list(errors), refusal=refusal)
        return render(request, LIST, context, status=400 if errors else 200)

    unstorable = kit.check_text(request.POST)
    if unstorable is not None:
        return refuse(*(f"{e.field}: {e.message}" for e in unstorable.errors))
    body, invalid, _ = kit.parse(request.POST, with_prompt=False, model_info=lookup_model)
    if invalid is not None:
        return refuse(*(f"{e.field}: {e.message}" for e in invalid.errors))
    upload = request.FILES.get("file")
    if upload is None:
        return refuse("Choose a file of prompts (JSONL, CSV or text).")
    chosen = request.POST.get("format", "auto")
    if chosen not in FORMATS:
        return refuse(f"format: choose one of {', '.join(FORMATS)}")
    fmt = detect(upload.name or "", chosen)
    try:
        prompts = parse(upload.read(), fmt)
        planned = feeding.plan(body, prompts)
        feeding.check_budget(request.user, planned.body, planned.counts)
    except UploadError as exc:
        return refuse(f"{upload.name or 'The file'} ({fmt}): {exc}")
    except ParamsInvalid as exc:
        return refuse(*(f"{e.field}: {e.message}" for e in exc.errors))
    except BackendError as exc:
        return refuse(f"The backend could not check the batch ({exc.code}): {exc.message}")
    except feeding.BatchRefused as refusal:
        return refuse(refusal=refusal)
    title = (request.POST.get("title") or "").strip() or (upload.name or "")
    batch = feeding.create(request.user, title, planned.body, prompts, planned.counts)
    return redirect("batch:detail", batch.pk)


def _detail_context(request: HtmxRequest, batch: Batch) -> dict[str, Any]:
    items = batch.items.select_related("generation").order_by("index")
    if request.GET.get("failed"):
        items = items.filter(state=BatchItem.State.FAILED)
    chosen, filter_problem = charts.sample_filter(request.GET)  # a histogram bar's filter
    items = charts.filtered(items, chosen)
    page = Paginator(items, PAGE_SIZE).get_page(request.GET.get("page"))
    return {
        "batch": batch,
        "progress": batch.progress(),
        "page": page,
        "only_failed": bool(request.GET.get("failed")),
        "n": batch.params.get("n") or 1,
        "sample_filter": chosen,
        "filter_problem": filter_problem,
    }


@require_GET
def batch_detail(request: HtmxRequest, batch_id: int) -> HttpResponse:
    return render(request, DETAIL, _detail_context(request, _own(request, batch_id)))


@require_GET
def batch_results(request: HtmxRequest, batch_id: int) -> HttpResponse:
    """The results table alone (paging, and the refresh while the batch runs)."""
    return render(request, f"{DETAIL}#results", _detail_context(request, _own(request, batch_id)))


def _after_action(request: HtmxRequest, batch: Batch, **extra: Any) -> HttpResponse:
    if not request.htmx:
        for message in extra.get("notices", []):
            messages.info(request, message)
        return redirect("batch:detail", batch.pk)
    batch.refresh_from_db()
    context = {**_detail_context(request, batch), **extra}
    return render(request, f"{DETAIL}#controls_and_results", context)


@require_POST
def batch_control(request: HtmxRequest, batch_id: int, control: str) -> HttpResponse:
    batch = _own(request, batch_id)
    notices: list[str] = []
    if control == "pause":
        if batch.pause():
            feeding.publish(batch.pk)
        else:
            notices.append(f"The batch is {batch.state}: nothing to pause.")
    elif control == "resume":
        if not feeding.resume(batch):
            notices.append(f"The batch is {batch.state}: nothing to resume.")
    elif control == "cancel":
        feeding.cancel(batch)
    elif control == "retry":
        try:
            count = feeding.retry(request.user, batch, batch.items.all())
        except feeding.BatchRefused as refusal:
            notices.append(f"Not retried. {refusal.message}")
        else:
            notices.append(f"{count} failed prompt{'s' if count != 1 else ''} sent again."
                           if count else "No failed prompts to retry.")  # fmt: skip
    else:
        raise Http404("no such action")
    return _after_action(request, batch, notices=notices)


@require_POST
def batch_delete(request: HtmxRequest, batch_id: int) -> HttpResponse:
    batch = _own(request, batch_id)
    feeding.cancel(batch)
    batch.delete()
    messages.info(request, f"Deleted batch “{batch.title}”.")
    if request.htmx:
        return HttpResponse(status=204, headers={"HX-Redirect": reverse("batch:list")})
    return redirect("batch:list")


@require_POST
def item_retry(request: HtmxRequest, batch_id: int, item_id: int) -> HttpResponse:
    batch = _own(request, batch_id)
    item = get_object_or_404(BatchItem, pk=item_id, batch=batch)
    notices = []
    try:
        if not feeding.retry(request.user, batch, BatchItem.objects.filter(pk=item.pk)):
            notices.append(f"Prompt {item.index} is {item.state}: only failed prompts are retried.")
    except feeding.BatchRefused as refusal:
        notices.append(f"Not retried. {refusal.message}")
    return _after_action(request, batch, notices=notices)


@require_GET
def item_workbench(request: HtmxRequest, batch_id: int, item_id: int) -> HttpResponse:
    """The row's run in the Workbench (its settings, prompt and samples), while the
    door still keeps its checkpoint (7 days)."""
    item = get_object_or_404(BatchItem, pk=item_id, batch=_own(request, batch_id))
    if item.generation_id is None:
        messages.error(request, f"Prompt {item.index} has no run to open (it is {item.state}, "
                                "or its checkpoint expired): open it as a Loom tree instead.")  # fmt: skip
        return redirect("batch:detail", batch_id)
    return redirect(f"{reverse('workbench')}?generation={item.generation_id}")


@require_POST
def item_loom(request: HtmxRequest, batch_id: int, item_id: int) -> HttpResponse:
    """A new Loom tree: the prompt as the root, each sample a model-written child (with
    its tokens and logprobs while the checkpoint is kept)."""
    batch = _own(request, batch_id)
    item = get_object_or_404(BatchItem, pk=item_id, batch=batch)
    settings = kit.stored_params(batch.params)
    with transaction.atomic():
        tree = Tree.objects.create_from_prompt(
            request.user, item.prompt, title=f"{batch.title} #{item.index}", settings=settings
        )
        generation = (
            Generation.objects.select_for_update()
            .filter(pk=item.generation_id, owner_id=request.user.pk).first()
            if item.generation_id is not None else None
        )  # fmt: skip
        if generation is not None and generation.is_terminal:
            attach(generation, tree.root, label=f"batch {batch.pk} prompt {item.index}")
        else:
            for sample in item.samples:
                if sample.get("text"):
                    tree.root.add_child(sample["text"], author=Author.MODEL, log=False,
                                        finish_reason=(sample.get("finish_reason") or "")[:20],
                                        written_by=request.user)  # fmt: skip
    return redirect("loom:tree", tree.pk)


@require_GET
def batch_export(request: HtmxRequest, batch_id: int, fmt: str) -> HttpResponseBase:
    batch = _own(request, batch_id)
    if fmt not in exports.FORMATS:
        raise Http404("no such format")
    return exports.download(request, batch, fmt)
