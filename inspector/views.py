"""Inspect: score a text token by token with prompt logprobs. Each view is form →
service (inspector.services: the request recipes and what is kept) → render."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from completions.client import get_model, list_models
from completions.errors import BackendError
from completions.hints import model_hints
from completions.models import Generation
from completions.registry import save_to_history
from core.forms import first_error
from core.shortcuts import HtmxRequest
from core.tokens import LEGEND, Chip, chips_html, probability, visible_text
from inspector import charts, scoring, services
from inspector.forms import ChoicesForm, CompareForm, SaveForm, ScoreForm

PAGE = "inspector/inspect.html"


# --------------------------------------------------------------------------- helpers


def _models() -> tuple[list[Any], str | None, str]:
    try:
        models = list_models()
        return models, get_model(None).id, ""
    except BackendError as exc:
        return [], None, f"The backend's model list is unavailable: {exc.message}"


def _forms(data: QueryDict | None = None, which: str = "") -> dict[str, Any]:
    models, default, problem = _models()
    kw: dict[str, Any] = {"models": models, "default_model": default}
    return {
        # Three forms on one page: distinct auto ids keep labels pointing at their own fields.
        "score_form": ScoreForm(data if which == "score" else None, auto_id="score_%s", **kw),
        "choices_form": ChoicesForm(
            data if which == "choices" else None, auto_id="choices_%s", **kw
        ),
        "compare_form": CompareForm(
            data if which == "compare" else None, auto_id="compare_%s", **kw
        ),
        "models": models,
        "backend_problem": problem,
        "tab": which or "score",
        # What add_special_tokens does with the default model's tokenizer (SmolLM2's
        # adds nothing: said so, rather than "prepends a BOS").
        "special_hint": model_hints(models[0] if models else None).get("add_special_tokens", ""),
    }


def _owned(request: HttpRequest, generation_id: int) -> Generation:
    """The user's own inspect result; anyone else's is a 404 (not a 403: ids are
    guessable, existence is not theirs to learn)."""
    generation = get_object_or_404(
        Generation.objects.defer("choices"),
        pk=generation_id,
        owner=request.user,
        kind=Generation.Kind.INSPECT,
    )
    if not generation.target or "mode" not in generation.target:
        raise Http404("not an Inspect result")
    return generation


def _respond_error(
    request: HtmxRequest, which: str, form: Any, message: str = "", refusal: Any = None
) -> HttpResponse:
    context = _forms(request.POST, which)
    context[f"{which}_form"] = form
    context["error"] = message
    context["budget_refusal"] = refusal if isinstance(refusal, services.BudgetRefusal) else None
    if request.htmx:
        # A score form's field errors go next to their fields only: the result shown
        # (the last scoring) stays where it is.
        fields_only = which == "score" and not message
        context["fields_only"] = fields_only
        response = render(request, f"{PAGE}#errors", context)
        if fields_only:
            response["HX-Reswap"] = "none"
        return response
    return render(request, PAGE, context, status=400)


def _respond_result(request: HtmxRequest, generation: Generation) -> HttpResponse:
    url = reverse("inspect_result", args=[generation.pk])
    if not request.htmx:
        return redirect(url)
    response = render(request, f"{PAGE}#result", _result_context(generation))
    response["HX-Push-Url"] = url
    return response


def _submit(request: HtmxRequest, which: str, run: Any) -> HttpResponse:
    """The three forms share one flow: validate, run (which may refuse before
    anything is sent), then show the result or the form with its message."""
    form = _forms(request.POST, which)[f"{which}_form"]
    if not form.is_valid():
        return _respond_error(request, which, form)
    try:
        generation = run(request.user, form.cleaned_data)
    except services.Refusal as exc:
        return _respond_error(request, which, form, str(exc), exc)
    return _respond_result(request, generation)


def _rows(data: list[dict[str, Any]]) -> list[scoring.TokenRow]:
    return [scoring.TokenRow.from_dict(r) for r in data]


def _chip(row: scoring.TokenRow) -> dict[str, Any]:
    """A row for the token table, and its chip for the shared token view
    (core/tokens.py): the probability scale there, Inspect's other colour modes
    (rank, relative to top-1) as extra classes."""
    shown = visible_text(row.text) if row.text else ""
    rank = scoring.rank_bucket(row.rank)
    rel = scoring.rel_bucket(row.delta_top1)
    if row.scored:
        info = f"id {row.id} · rank {row.rank} ({scoring.rank_bucket_label(rank)}) · {row.bits:.2f} bits"
        if row.entropy_bits is not None:
            info += f" · entropy {row.entropy_bits:.2f} bits"
    else:
        info = f"id {'?' if row.id is None else row.id} · first position: nothing predicts it"
    classes = f"r{'x' if rank is None else rank} q{'x' if rel is None else rel}"
    if row.special:
        classes += " special"
    if not row.scored:
        classes += " first"
    chip = Chip(
        "BOS" if row.special and not shown else shown,
        row.logprob,
        index=row.position,
        alternatives=_alternatives(row),
        info=info,
        classes=classes,
        attrs={
            "pos": str(row.position),
            "id": "" if row.id is None else str(row.id),
            "logprob": "" if row.logprob is None else repr(row.logprob),
            "rank": "" if row.rank is None else str(row.rank),
        },
    )
    return {"row": row, "shown": shown, "chip": chip}


def _alternatives(row: scoring.TokenRow) -> list[tuple[str, float, bool]]:
    """The popover's list: the top k, and the actual token marked (added when it was
    outside the top k)."""
    top = [(a.text, probability(a.logprob) or 0.0, a.id == row.id) for a in row.top]
    if row.logprob is not None and not row.in_top:
        top.append((row.text, probability(row.logprob) or 0.0, True))
    return top


def _delta_chip(index: int, pair: scoring.DeltaRow) -> Chip:
    """A compared token in the shared token view: coloured by Δ = B minus A (its own
    diverging scale, `d` classes), the popover giving both logprobs above B's
    alternatives."""
    bucket = scoring.delta_bucket(pair.delta)

    def number(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"

    return Chip(
        visible_text(pair.a.text),
        pair.b.logprob,
        alternatives=_alternatives(pair.b),
        info=f"Δ {number(pair.delta)} · A {number(pair.a.logprob)} · B {number(pair.b.logprob)}",
        classes=f"d{'x' if bucket is None else bucket}",
        attrs={"delta": "" if pair.delta is None else repr(pair.delta), "pair": str(index)},
    )


def _result_context(generation: Generation) -> dict[str, Any]:
    assert generation.target is not None  # an Inspect result is made with its target
    return {
        **result_context(generation.target, key=generation.pk),
        "generation": generation,
        "can_save": _can_save(generation),
    }


def rank_legend() -> list[tuple[int, str]]:
    """The rank colour mode's buckets (r0 …), as its legend names them."""
    return [(b, scoring.rank_bucket_label(b)) for b in range(len(scoring.RANK_EDGES) + 1)]


def rel_legend() -> list[tuple[int, str]]:
    """The relative mode's buckets (q0 …): how far below the top-1 token, in nats."""
    edges = scoring.REL_EDGES
    labels = ["the top choice"] + [f"up to {-e:g} below" for e in edges[1:]]
    return [*enumerate(labels), (len(edges), f"> {-edges[-1]:g} below")]


def result_context(target: dict[str, Any], *, key: Any = "result") -> dict[str, Any]:
    """What the result partial shows, from the stored result alone (a History
    entry keeps it after its checkpoint is purged). `key` names its charts."""
    context: dict[str, Any] = {"target": target, "mode": target["mode"]}
    if target["mode"] == "score":
        rows = _rows(target["rows"])
        chips = [_chip(r) for r in rows]
        for chip, total in zip(chips, charts.cumulative_bits(rows), strict=True):
            chip["cumulative"] = total
        context.update(
            chips=chips,
            chips_html=chips_html([c["chip"] for c in chips]),
            token_legend=LEGEND,
            rank_legend=rank_legend(),
            rel_legend=rel_legend(),
            summary=scoring.summarise(rows),
            chart=charts.surprisal_chart(rows, full_vocab=bool(target.get("full_vocab")), key=key),
        )
    elif target["mode"] == "choices":
        context["scores"] = target["scores"]
    elif target["mode"] == "compare":
        pairs = [
            scoring.DeltaRow(scoring.TokenRow.from_dict(a), scoring.TokenRow.from_dict(b))
            for a, b in target["pairs"]
        ]
        context["pairs"] = pairs
        context["chips_html"] = chips_html([_delta_chip(i, p) for i, p in enumerate(pairs)])
        context["chart"] = charts.compare_chart(pairs, target.get("labels") or [], key=key)
        deltas = [p.delta for p in pairs if p.delta is not None]
        context["delta_total"] = sum(deltas)
    return context


def _can_save(generation: Generation) -> bool:
    return generation.claimed_at is None  # saved once: History has it


# --------------------------------------------------------------------------- pages


@require_GET
def inspect(request: HttpRequest) -> HttpResponse:
    return render(request, PAGE, _forms())


@require_GET
def result(request: HttpRequest, generation_id: int) -> HttpResponse:
    """A scoring's permalink (History links here)."""
    return render_result(request, _owned(request, generation_id))


def render_result(request: HttpRequest, generation: Generation) -> HttpResponse:
    """The page with this scoring's result (also completions.registry's hook for
    "inspect": the door's result view has checked the owner)."""
    if not generation.target or "mode" not in generation.target:
        raise Http404("not an Inspect result")
    context = _forms(None, generation.target.get("tab", "score"))
    context.update(_result_context(generation))
    return render(request, PAGE, context)


@require_POST
def score(request: HtmxRequest) -> HttpResponse:
    return _submit(request, "score", services.score)


@require_POST
def choices(request: HtmxRequest) -> HttpResponse:
    return _submit(request, "choices", services.choices)


@require_POST
def compare(request: HtmxRequest) -> HttpResponse:
    return _submit(request, "compare", services.compare)


# --------------------------------------------------------------------------- exports


@require_GET
def export(request: HttpRequest, generation_id: int, fmt: str) -> HttpResponse:
    if fmt not in ("csv", "jsonl"):
        raise Http404("export as .csv or .jsonl")
    generation = _owned(request, generation_id)
    assert generation.target is not None  # _owned: an Inspect result has its target
    records = scoring.export_records(generation.target.get("rows") or [])
    if fmt == "csv":
        body, content_type = scoring.to_csv(records), "text/csv; charset=utf-8"
    else:
        body, content_type = scoring.to_jsonl(records), "application/x-ndjson; charset=utf-8"
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="inspect-{generation.pk}.{fmt}"'
    return response


@require_POST
def save(request: HttpRequest, generation_id: int) -> HttpResponse:
    generation = _owned(request, generation_id)
    if not _can_save(generation):
        raise Http404("already saved to History")

    form = SaveForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not saved: {first_error(form)}")
        return redirect(result_url(generation))
    full = Generation.objects.get(pk=generation.pk)
    # A compare across two models ran a second request; it is part of this result.
    parts = Generation.objects.filter(
        owner_id=request.user.pk, kind=Generation.Kind.INSPECT, target__of=generation.pk
    )
    save_to_history(
        full,
        title=form.cleaned_data["title"],
        result=generation.target,
        also=list(parts),
    )
    return redirect("history")


def result_url(generation: Generation) -> str:
    return reverse("inspect_result", args=[generation.pk])
