"""The Workbench page and its htmx fragments; History, Recover and export live in
workbench.history_views. Every object is looked up with owner=request.user, so
someone else's id is a 404."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from completions import code, kit, lifecycle, pipeline
from completions.budget import BudgetRefused, usage_summary
from completions.client import count_tokens, get_model, list_models
from completions.errors import BackendError
from completions.hints import model_hints
from completions.models import Generation
from completions.schema import ModelInfo, ParamsInvalid, validate_params
from completions.shortcuts import own_generation
from core.forms import first_error
from core.shortcuts import HtmxRequest, int_or_404
from core.tokens import chips_for, chips_html
from loom.models import Tree
from workbench import drafts
from workbench.display import LEGEND, sample_views
from workbench.drafts import DraftForm
from workbench.forms import PresetForm, SavedPromptForm, SaveForm
from workbench.models import TRANSPORT_PARAMS, Draft, Preset, Run, SavedPrompt

PAGE = "workbench/workbench.html"
RESULTS = "workbench/results.html"
# Every slot an error can be shown in; errors for any other field go to "general".
ERROR_SLOTS = ["model", "prompt", *kit.BY_NAME, "stop", "general"]
KINDS = ("workbench", "inspect")


# --------------------------------------------------------------------------- helpers


def _models() -> tuple[list[ModelInfo], str]:
    """The backend's models, or [] and a reason when it cannot be reached."""
    try:
        return list_models(), ""
    except BackendError as exc:
        return [], f"The backend cannot be reached ({exc.code}): {exc.message}"


def _model_info(model_id: str) -> ModelInfo | None:
    try:
        return get_model(model_id or None)
    except BackendError:
        return None


def _error_slots(exc: ParamsInvalid | None) -> list[tuple[str, str]]:
    """(slot, message) for every slot, empty messages clearing earlier errors."""
    messages: dict[str, list[str]] = {slot: [] for slot in ERROR_SLOTS}
    for error in exc.errors if exc else []:
        slot = error.field.split(".")[0] if error.field.split(".")[0] in messages else "general"
        own = slot != "general" or error.field == "general"
        text = error.message if own else f"{error.field}: {error.message}"
        messages[slot].append(text)
    return [(slot, "; ".join(texts)) for slot, texts in messages.items()]


def _check(request: HttpRequest) -> tuple[dict[str, Any], ParamsInvalid | None, ModelInfo | None]:
    unstorable = kit.check_text(request.POST)
    if unstorable is not None:
        return {}, unstorable, None
    return kit.parse(request.POST, model_info=_model_info)


def _budget(request: HttpRequest) -> dict[str, int]:
    return usage_summary(request.user)


def result_context(request: HttpRequest, generation: Generation) -> dict[str, Any]:
    body = generation.params or {}
    saved = generation.runs.filter(owner_id=request.user.pk).order_by("-pk").first()
    return {
        "generation": generation,
        "form_id": f"save-{generation.pk}",
        "samples": sample_views(generation.choices, usage=generation.usage),
        "prompt": body.get("prompt") if isinstance(body.get("prompt"), str) else "",
        "echo": bool(body.get("echo")),
        "saved_run": saved,
        "budget": _budget(request),
        "token_legend": LEGEND,
    }


# --------------------------------------------------------------------------- the page


@never_cache  # Back must show the draft as it is now, not a cached page
@require_GET
def workbench(request: HttpRequest) -> HttpResponse:
    """The page: the user's draft (prompt and settings as typed) and the runs it shows.
    ?prompt=<id> opens a saved prompt, ?run=<id> a History entry's settings,
    ?generation=<id> a run (live or finished, e.g. from Recover); the page then saves
    that as the draft and drops the query (workbench.js)."""
    draft = Draft.objects.of(request.user)
    body: dict[str, Any] | None = None
    opened = None
    if "prompt" in request.GET:
        body = _own_or_404(SavedPrompt, request, request.GET["prompt"]).body
    elif "run" in request.GET:
        body = _own_or_404(Run, request, request.GET["run"]).request_params
    elif "generation" in request.GET:
        opened = own_generation(request, int_or_404(request.GET["generation"]), *KINDS)
        if opened.kind == Generation.Kind.INSPECT and (opened.target or {}).get("mode"):
            return redirect("inspect_result", opened.pk)  # a scoring opens in Inspect
        body = opened.params or {}
    if body is not None:
        body = {k: v for k, v in body.items() if k not in TRANSPORT_PARAMS}
        values = kit.form_values(body)
    else:
        values = drafts.page_values(draft)
    models, model_error = _models()
    shown = list(draft.runs)
    if opened is not None:
        shown = [opened.pk, *(i for i in shown if i != opened.pk)]
    context = {
        **kit.params_context(values, models, model_error),
        "presets": Preset.objects.filter(owner_id=request.user.pk),
        "saved_prompts": SavedPrompt.objects.filter(owner_id=request.user.pk),
        "budget": _budget(request),
        "recoverable": Generation.objects.recoverable(request.user).filter(kind__in=KINDS).count(),
        "token_legend": LEGEND,
        "run_blocks": _run_blocks(request, shown),
        "draft_from_url": body is not None,
        "show_generation": opened.pk if opened is not None else None,
    }
    return render(request, PAGE, context)


def _own_or_404(model: type, request: HttpRequest, pk: str) -> Any:
    return get_object_or_404(model, pk=int_or_404(pk), owner=request.user)


def _run_blocks(request: HttpRequest, ids: list[int]) -> list[str]:
    """The runs the draft shows, newest first, each rendered as the page shows a run."""
    by_id = {
        g.pk: g
        for g in Generation.objects.filter(owner_id=request.user.pk, pk__in=ids, kind__in=KINDS)
    }
    blocks: list[str] = []
    for pk in ids:
        if (generation := by_id.get(pk)) is not None:
            generation = lifecycle.check_alive(generation)
            context = live_context(request, generation)
            blocks.append(render_to_string(f"{PAGE}#run", context, request))
    return blocks


def live_context(request: HttpRequest, generation: Generation) -> dict[str, Any]:
    """What the `run` partial needs: the live targets (with the text streamed so far,
    for a page that re-attaches to a running generation) or the finished result."""
    body = generation.params or {}
    context: dict[str, Any] = {
        "generation": generation,
        "choice_range": range(len(generation.choices) or 1),
        "token_legend": LEGEND,
        "prompt": body.get("prompt") if isinstance(body.get("prompt"), str) else "",
        "echo": bool(body.get("echo")),
        "streams_logprobs": body.get("logprobs") is not None,
        "live_choices": [
            (i, live_text(c.get("text") or "", c.get("logprobs")))
            for i, c in enumerate(generation.choices or [{}])
        ],
    }
    if generation.is_terminal:
        context.update(result_context(request, generation))
    return context


def live_text(text: str, logprobs: Any) -> str:
    """A running choice's text so far: chips when it has logprobs (escaped markup)."""
    chips = chips_for(text, logprobs)
    return text if chips is None else chips_html(chips)


@require_POST
def check(request: HttpRequest) -> HttpResponse:
    """Validate as the user types: errors next to their fields, and the prompt's
    token count when the backend can count."""
    data, invalid, info = _check(request)
    tokens = None
    if info is not None and isinstance(data.get("prompt"), str) and data["prompt"]:
        counts = count_tokens(info.id, data["prompt"])
        tokens = counts[0] if counts else None
    context = {
        "errors": _error_slots(invalid),
        "tokens": tokens,
        "counted": info is not None,
        # The chosen model's own help (its logprobs cap, what its tokenizer adds).
        "hints": sorted(model_hints(info).items()),
    }
    return render(request, f"{PAGE}#check", context)


@require_POST
def run(request: HttpRequest) -> HttpResponse:
    data, invalid, _ = _check(request)
    context: dict[str, Any] = {"errors": _error_slots(invalid)}
    if invalid is not None:
        return render(request, f"{PAGE}#run_invalid", context)
    try:
        return _start_live(request, data, context)
    except ParamsInvalid as exc:  # the door's model-aware checks (e.g. unknown model)
        context["errors"] = _error_slots(exc)
        return render(request, f"{PAGE}#run_invalid", context)


def _start_live(request: HttpRequest, data: dict, context: dict[str, Any]) -> HttpResponse:
    """Start a Workbench run and render it live on the page (shown in the draft), or
    the refusal that stopped it; ParamsInvalid is the caller's to word."""
    try:
        generation = pipeline.start(request.user, data, kind="workbench")
    except BudgetRefused as refusal:
        context.update(refusal=refusal, budget=_budget(request))
        return render(request, f"{PAGE}#run_refused", context)
    except BackendError as exc:
        context["backend_error"] = exc
        return render(request, f"{PAGE}#run_backend_error", context)
    Draft.objects.of(request.user).show_run(generation)
    context.update(live_context(request, generation), budget=_budget(request))
    return render(request, f"{PAGE}#run_live", context)


@require_POST
def rerun_generation(request: HttpRequest, generation_id: int) -> HttpResponse:
    """The same request as a new run on the page, seed included (every run has one: the
    door draws it when the form leaves it empty), so the text comes out the same."""
    original = get_object_or_404(
        Generation, pk=generation_id, owner=request.user, kind=Generation.Kind.WORKBENCH
    )
    body = {k: v for k, v in (original.params or {}).items() if k not in TRANSPORT_PARAMS}
    context: dict[str, Any] = {}
    try:
        return _start_live(request, body, context)
    except ParamsInvalid as exc:  # e.g. the model is no longer served
        context["backend_error"] = BackendError("invalid_request", str(exc))
        return render(request, f"{PAGE}#run_backend_error", context)


@require_POST
def dismiss(request: HttpRequest, generation_id: int) -> HttpResponse:
    """Take a run off the page (it stays under Recover until saved or expired)."""
    generation = own_generation(request, generation_id, *KINDS)
    Draft.objects.of(request.user).hide_run(generation)
    return HttpResponse(status=204)


@require_POST
def draft(request: HttpRequest) -> HttpResponse:
    """Autosave (workbench.js, debounced, and a beacon when the page is left): the form
    as typed. A value that cannot be stored refuses the whole save (400) and leaves the
    stored draft as it was; an invalid parameter is stored as typed."""
    form = DraftForm(request.POST)
    if not form.is_valid():
        context = {"draft_error": first_error(form)}
        return render(request, f"{PAGE}#draft_status", context, status=400)
    show = form.cleaned_data.get("show")
    generation = own_generation(request, show, *KINDS) if show else None
    current = Draft.objects.of(request.user)
    current.update_values(form.values(), **drafts.sequence(form))
    if generation is not None:
        current.show_run(generation)
    return render(request, f"{PAGE}#draft_status", {"draft_saved": True})


@require_POST
def view_code(request: HttpRequest) -> HttpResponse:
    data, invalid, _ = _check(request)
    context: dict[str, Any] = {"errors": _error_slots(invalid), "invalid": invalid}
    if invalid is None:
        body = validate_params(data).to_body()
        # Weft's own /v1 (with a key from the API keys page): the short ids are routing
        # aliases, which a backend behind Weft would not know.
        api = request.build_absolute_uri("/v1")
        context["curl"] = code.as_curl(body, api)
        context["python"] = code.as_python(body, api)
    return render(request, f"{PAGE}#code", context)


# --------------------------------------------------------------------------- a generation


def render_result(request: HttpRequest, generation: Generation) -> HttpResponse:
    """The saved result of a run (completions.registry's hook for "workbench"): what
    the door's final fragment loads in place of the streamed text."""
    context = {**result_context(request, generation), "oob": True}
    return render(request, f"{RESULTS}#result", context)


@require_POST
def save(request: HtmxRequest, generation_id: int) -> HttpResponse:
    generation = own_generation(request, generation_id, *KINDS)
    if not generation.is_terminal:
        return render(request, f"{RESULTS}#save_error", {"message": "Wait for the run to end."})
    form = SaveForm(
        request.POST, indexes=[int(c.get("index", i)) for i, c in enumerate(generation.choices)]
    )
    if not form.is_valid():
        return render(request, f"{RESULTS}#save_error", {"message": first_error(form)})
    indexes = form.cleaned_data["choice"]
    # The save form marks itself, so unticking every sample is not "save all".
    if not generation.choices or ("choices_present" in request.POST and not indexes):
        return render(request, f"{RESULTS}#save_error", {"message": "Choose a sample to keep."})
    run = Run.objects.save_generation(
        generation,
        title=form.cleaned_data["title"],
        note=form.cleaned_data["note"],
        choice_indexes=indexes or None,
    )
    if not request.htmx:
        return redirect("wb_run_detail", run.pk)
    return render(request, f"{RESULTS}#saved", {"saved_run": run, "generation": generation})


@require_POST
def open_in_loom(request: HttpRequest) -> HttpResponse:
    unstorable = kit.check_text(request.POST)
    if unstorable is not None:
        messages.error(request, f"Not opened in the Loom: {unstorable}")
        return redirect("workbench")
    body, invalid, _ = kit.parse(request.POST, with_prompt=False)
    if invalid is not None:
        messages.error(request, f"Not opened in the Loom: {invalid}")
        return redirect("workbench")
    tree = Tree.objects.create_from_prompt(
        request.user, request.POST.get("prompt", ""), settings=kit.stored_params(body)
    )
    return redirect(reverse("loom:tree", args=[tree.pk]))


# --------------------------------------------------------------------------- presets, prompts


def _presets(request: HttpRequest, **extra: Any) -> HttpResponse:
    context = {"presets": Preset.objects.filter(owner_id=request.user.pk), **extra}
    return render(request, f"{PAGE}#presets", context)


def _to_save(
    request: HttpRequest, form: PresetForm | SavedPromptForm, name_field: str, what: str
) -> tuple[str, dict] | str:
    """(name, parameters to store) of a preset or saved prompt, or why it is refused."""
    if not form.is_valid():
        if name_field in form.errors and not request.POST.get(name_field, "").strip():
            return f"Name the {what} first."
        return f"Not saved: {first_error(form)}"
    if (unstorable := kit.check_text(request.POST)) is not None:
        return f"Not saved: {unstorable}"
    data, invalid, _ = kit.parse(request.POST, with_prompt=False)
    if invalid is not None:
        return f"Not saved: {invalid}"
    return form.cleaned_data[name_field], kit.stored_params(data)


@require_POST
def preset_save(request: HttpRequest) -> HttpResponse:
    saving = _to_save(request, PresetForm(request.POST), "preset_name", "preset")
    if isinstance(saving, str):
        return _presets(request, preset_error=saving)
    name, data = saving
    Preset.objects.update_or_create(owner_id=request.user.pk, name=name, defaults={"params": data})
    return _presets(request, preset_message=f"Saved preset “{name}”.")


@require_GET
def preset_load(request: HttpRequest, preset_id: int) -> HttpResponse:
    preset = get_object_or_404(Preset, pk=preset_id, owner=request.user)
    models, model_error = _models()
    values = kit.form_values(preset.params)
    return render(request, f"{PAGE}#params", kit.params_context(values, models, model_error))


@require_POST
def preset_delete(request: HttpRequest, preset_id: int) -> HttpResponse:
    get_object_or_404(Preset, pk=preset_id, owner=request.user).delete()
    return _presets(request)


def _prompts(request: HttpRequest, **extra: Any) -> HttpResponse:
    context = {"saved_prompts": SavedPrompt.objects.filter(owner_id=request.user.pk), **extra}
    return render(request, f"{PAGE}#saved_prompts", context)


@require_POST
def prompt_save(request: HttpRequest) -> HttpResponse:
    form = SavedPromptForm(request.POST)
    saving = _to_save(request, form, "prompt_name", "prompt")
    if isinstance(saving, str):
        return _prompts(request, prompt_error=saving)
    name, data = saving
    SavedPrompt.objects.update_or_create(
        owner_id=request.user.pk,
        name=name,
        defaults={"prompt": form.cleaned_data["prompt"], "params": data},
    )
    return _prompts(request, prompt_message=f"Saved prompt “{name}”.")


@require_POST
def prompt_delete(request: HttpRequest, prompt_id: int) -> HttpResponse:
    get_object_or_404(SavedPrompt, pk=prompt_id, owner=request.user).delete()
    return _prompts(request)
