"""Inspect: score a text token by token with prompt logprobs.

Every scoring is the seed's recipe — prompt_logprobs=k (or -1), max_tokens=1,
echo=true, the one generated token ignored — sent through the door's run_now, so the
budget is reserved (or the run refused) and the answer lands in a Generation
checkpoint. The computed token table is kept in the generation's ``target`` so a
result page, its exports and History never re-parse a full-vocabulary answer.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from completions.budget import BudgetRefused
from completions.client import get_model, list_models, prompt_token_bound
from completions.errors import BackendError
from completions.models import Generation
from completions.pipeline import run_now
from completions.schema import ParamsInvalid
from inspector import fullvocab, scoring, tokens
from inspector.forms import ChoicesForm, CompareForm, SaveForm, ScoreForm
from loom.forms import first_error
from workbench.models import Run

PAGE = "inspector/inspect.html"


class Refusal(Exception):
    """Something to tell the user instead of sending the request."""


# --------------------------------------------------------------------------- helpers


def _models() -> tuple[list[Any], str | None, str]:
    try:
        models = list_models()
        return models, get_model(None).id, ""
    except BackendError as exc:
        return [], None, f"The backend's model list is unavailable: {exc.message}"


def _forms(data=None, which: str = "") -> dict[str, Any]:
    models, default, problem = _models()
    kw = {"models": models, "default_model": default}
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
    }


def _run(user: Any, data: dict[str, Any], *, complete: Any = None) -> Generation:
    """run_now, with every way of not getting a result turned into a Refusal.
    `complete` reads the answer in place of the door's client.complete."""
    try:
        generation = run_now(user, data, kind="inspect", complete=complete)
    except ParamsInvalid as exc:
        raise Refusal("; ".join(f"{e.field}: {e.message}" for e in exc.errors)) from None
    except BudgetRefused as exc:
        raise Refusal(exc.message) from None
    if generation.state != Generation.State.DONE:
        code = f" ({generation.error_code})" if generation.error_code else ""
        rid = f" — request id {generation.request_id}" if generation.request_id else ""
        raise Refusal(f"The backend did not score it{code}: {generation.error_message}{rid}")
    return generation


def _keep(generation: Generation, target: dict[str, Any]) -> None:
    generation.target = target
    Generation.objects.filter(pk=generation.pk).update(target=target)


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


def _respond_error(request: HttpRequest, which: str, form: Any, message: str = "") -> HttpResponse:
    context = _forms(request.POST, which)
    context[f"{which}_form"] = form
    context["error"] = message
    if request.htmx:
        return render(request, f"{PAGE}#errors", context)
    return render(request, PAGE, context, status=400)


def _respond_result(request: HttpRequest, generation: Generation) -> HttpResponse:
    url = reverse("inspect_result", args=[generation.pk])
    if not request.htmx:
        return redirect(url)
    response = render(request, f"{PAGE}#result", _result_context(generation))
    response["HX-Push-Url"] = url
    return response


def _submit(request: HttpRequest, which: str, run: Any) -> HttpResponse:
    """The three forms share one flow: validate, run (which may refuse before
    anything is sent), then show the result or the form with its message."""
    form = _forms(request.POST, which)[f"{which}_form"]
    if not form.is_valid():
        return _respond_error(request, which, form)
    try:
        generation = run(request.user, form.cleaned_data)
    except Refusal as exc:
        return _respond_error(request, which, form, str(exc))
    return _respond_result(request, generation)


def _rows(data: list[dict[str, Any]]) -> list[scoring.TokenRow]:
    return [scoring.TokenRow.from_dict(r) for r in data]


def _chip(row: scoring.TokenRow) -> dict[str, Any]:
    """What a chip needs: the row plus its bucket in each colour mode."""
    return {
        "row": row,
        "shown": scoring.visible_text(row.text) if row.text else "",
        "p": scoring.prob_bucket(row.logprob),
        "r": scoring.rank_bucket(row.rank),
        "rel": scoring.rel_bucket(row.delta_top1),
        "rank_label": scoring.rank_bucket_label(scoring.rank_bucket(row.rank)),
        "top": [
            {"alt": a, "shown": scoring.visible_text(a.text), "actual": a.id == row.id}
            for a in row.top
        ],
        "actual_outside": row.logprob is not None and not row.in_top,
    }


def _result_context(generation: Generation) -> dict[str, Any]:
    return {
        **result_context(generation.target),
        "generation": generation,
        "can_save": _can_save(generation),
    }


def result_context(target: dict[str, Any]) -> dict[str, Any]:
    """What the result partial shows, from the stored result alone (a History
    entry keeps it after its checkpoint is purged)."""
    context: dict[str, Any] = {"target": target, "mode": target["mode"]}
    if target["mode"] == "score":
        rows = _rows(target["rows"])
        context.update(
            chips=[_chip(r) for r in rows],
            summary=scoring.summarise(rows),
            chart=scoring.surprisal_chart(rows),
        )
    elif target["mode"] == "choices":
        context["scores"] = target["scores"]
    elif target["mode"] == "compare":
        pairs = [
            scoring.DeltaRow(scoring.TokenRow.from_dict(a), scoring.TokenRow.from_dict(b))
            for a, b in target["pairs"]
        ]
        context["pairs"] = [
            {
                "pair": p,
                "shown": scoring.visible_text(p.a.text),
                "d": scoring.delta_bucket(p.delta),
                "delta": p.delta,
            }
            for p in pairs
        ]
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
    generation = _owned(request, generation_id)
    context = _forms(None, generation.target.get("tab", "score"))
    context.update(_result_context(generation))
    return render(request, PAGE, context)


@require_POST
def score(request: HttpRequest) -> HttpResponse:
    return _submit(request, "score", _score)


def _score(user: Any, data: dict[str, Any]) -> Generation:
    model = get_model(data["model"])
    special = bool(data.get("add_special_tokens"))
    full = bool(data.get("full_vocab"))
    k = data["k"]
    if k > model.max_logprobs:
        raise Refusal(f"k is at most {model.max_logprobs} for {model.id}.")
    if data["source"] == "ids":
        prompt: str | list[int] = data["ids"]
        bad = tokens.out_of_vocabulary(model.id, data["ids"])
        if bad and bad[0]:
            size = f" (it has {bad[1]:,} tokens: ids 0–{bad[1] - 1:,})" if bad[1] else ""
            listed = ", ".join(str(t) for t in bad[0][:10])
            raise Refusal(f"Token ids out of the vocabulary of {model.id}{size}: {listed}.")
        tokenized: list[int] | None = data["ids"]
    else:
        prompt = data["text"]
        tokenized = tokens.tokenize(model.id, prompt, add_special_tokens=special)
        if tokenized is not None and not tokenized:
            raise Refusal("The text has no tokens with add_special_tokens off.")
    if full:
        # Refused before sending what could not be kept: the answer is read one
        # position at a time (inspector.fullvocab), but only up to the model's limit.
        length = len(tokenized) if tokenized is not None else prompt_token_bound(prompt)
        if length > model.full_vocab_max_prompt_tokens:
            known = "has" if tokenized is not None else "may have (the backend cannot count)"
            raise Refusal(
                f"The full vocabulary is available for prompts of at most "
                f"{model.full_vocab_max_prompt_tokens:,} tokens; this one {known} "
                f"{length:,}. Use a fixed k instead."
            )
    body: dict[str, Any] = {
        "model": model.id,
        "prompt": prompt,
        "max_tokens": 1,
        "echo": True,
        "prompt_logprobs": -1 if full else k,
    }
    if isinstance(prompt, str):
        # Token ids are forwarded verbatim; the toggle only means something for text.
        body["add_special_tokens"] = special
    reader = partial(fullvocab.complete, actual_ids=tokenized) if full else None
    generation = _run(user, body, complete=reader)
    choice = generation.choices[0]
    rows = scoring.build_rows(
        choice.get("prompt_logprobs") or [],
        stats=choice.get("prompt_stats"),
        prompt_ids=data["ids"] if data["source"] == "ids" else None,
        tokenized=tokenized,
        prompt_text=prompt if isinstance(prompt, str) else None,
        add_special_tokens=special,
        full_vocab=full,
        k=None if full else k,
    )
    target = {
        "mode": "score",
        "tab": "score",
        "model": model.id,
        "source": data["source"],
        "text": prompt if isinstance(prompt, str) else None,
        "ids": data.get("ids"),
        "k": k,
        "full_vocab": full,
        "add_special_tokens": special,
        "rows": [r.as_dict() for r in rows],
    }
    _keep(generation, target)
    return generation


@require_POST
def choices(request: HttpRequest) -> HttpResponse:
    return _submit(request, "choices", _choices)


def _choices(user: Any, data: dict[str, Any]) -> Generation:
    model = get_model(data["model"])
    special = bool(data.get("add_special_tokens"))
    prefix, candidates = data["prefix"], data["candidates"]
    prefix_ids = tokens.tokenize(model.id, prefix, add_special_tokens=special)
    if prefix_ids is None:
        raise Refusal("Choice scoring needs token ids, and this backend has no /tokenize.")
    prompts, starts = [], []
    for candidate in candidates:
        full = tokens.tokenize(model.id, prefix + candidate, add_special_tokens=special)
        if full is None:
            raise Refusal("The backend's /tokenize stopped answering.")
        start = scoring.continuation_start(prefix_ids, full)
        if start == 0:
            raise Refusal(
                "Nothing precedes the candidates, so their first token has no logprob: "
                "give a prefix or turn add_special_tokens on."
            )
        if start >= len(full):
            raise Refusal(f"The candidate {candidate!r} adds no tokens to the prefix.")
        prompts.append(full)
        starts.append(start)
    # One batched request: a list of token-id prompts. prompt_logprobs=1 gives each
    # position's own token (all a choice score needs) plus the top-1, so the table's
    # top1_logprob is the model's favourite, not the token itself.
    generation = _run(
        user,
        {"model": model.id, "prompt": prompts, "max_tokens": 1, "echo": True, "prompt_logprobs": 1},
    )
    by_index = {c["index"]: c for c in generation.choices}
    ranked = scoring.score_choices(
        candidates,
        starts,
        [by_index[i].get("prompt_logprobs") or [] for i in range(len(prompts))],
        prompts,
    )
    target = {
        "mode": "choices",
        "tab": "choices",
        "model": model.id,
        "prefix": prefix,
        "add_special_tokens": special,
        "scores": [
            {
                "place": place,
                "index": s.index,
                "text": s.text,
                "shown": scoring.visible_text(s.text),
                "total": s.total_logprob,
                "mean": s.mean_logprob,
                "tokens": s.tokens,
                "rows": [r.as_dict() for r in s.rows],
            }
            for place, s in enumerate(ranked, start=1)
        ],
        "rows": [
            {**r.as_dict(), "choice": s.index, "candidate": s.text} for s in ranked for r in s.rows
        ],
    }
    _keep(generation, target)
    return generation


@require_POST
def compare(request: HttpRequest) -> HttpResponse:
    return _submit(request, "compare", _compare)


COMPARE_K = 5


def _compare(user: Any, data: dict[str, Any]) -> Generation:
    special = bool(data.get("add_special_tokens"))
    text = data["text"]
    sides = [
        (get_model(data["model"]), data.get("prefix_a") or ""),
        (get_model(data["model_b"]), data.get("prefix_b") or ""),
    ]
    k = min(COMPARE_K, *(m.max_logprobs for m, _ in sides))
    base = {"max_tokens": 1, "echo": True, "prompt_logprobs": k, "add_special_tokens": special}
    if sides[0][0].id == sides[1][0].id:
        # Same model, two prefixes: one batched request of two text prompts.
        generation = _run(
            user, {**base, "model": sides[0][0].id, "prompt": [p + text for _, p in sides]}
        )
        plps = [c.get("prompt_logprobs") or [] for c in generation.choices]
    else:
        generation = _run(user, {**base, "model": sides[0][0].id, "prompt": sides[0][1] + text})
        other = _run(user, {**base, "model": sides[1][0].id, "prompt": sides[1][1] + text})
        plps = [
            generation.choices[0].get("prompt_logprobs") or [],
            other.choices[0].get("prompt_logprobs") or [],
        ]
        other.target = {"mode": "compare-part", "of": generation.pk}
        Generation.objects.filter(pk=other.pk).update(target=other.target)
    rows = [
        scoring.build_rows(
            plp,
            tokenized=tokens.tokenize(m.id, p + text, add_special_tokens=special),
            prompt_text=p + text,
            add_special_tokens=special,
            k=k,
        )
        for plp, (m, p) in zip(plps, sides, strict=True)
    ]
    pairs = scoring.align_from_end(rows[0], rows[1], max_chars=len(text))
    target = {
        "mode": "compare",
        "tab": "compare",
        "text": text,
        "labels": [f"{m.id}" + (f" after {p!r}" if p else "") for m, p in sides],
        "pairs": [[p.a.as_dict(), p.b.as_dict()] for p in pairs],
        "rows": [{**p.b.as_dict(), "logprob_a": p.a.logprob, "delta": p.delta} for p in pairs],
    }
    _keep(generation, target)
    return generation


# --------------------------------------------------------------------------- exports


@require_GET
def export(request: HttpRequest, generation_id: int, fmt: str) -> HttpResponse:
    if fmt not in ("csv", "jsonl"):
        raise Http404("export as .csv or .jsonl")
    generation = _owned(request, generation_id)
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
        owner=request.user, kind=Generation.Kind.INSPECT, target__of=generation.pk
    )
    Run.objects.save_generation(
        full,
        title=form.cleaned_data["title"],
        result=generation.target,
        also=list(parts),
    )
    return redirect("history")


def result_url(generation: Generation) -> str:
    return reverse("inspect_result", args=[generation.pk])
