"""Inspect's three scorings, each the seed's recipe — prompt_logprobs=k (or -1),
max_tokens=1, echo=true, the one generated token ignored — sent through the door's
run_now, so the budget is reserved (or the run refused) and the answer lands in a
Generation checkpoint. The computed token table is kept in the generation's
``target`` so a result page, its exports and History never re-parse a
full-vocabulary answer. Views call these with a valid form's cleaned_data."""

from __future__ import annotations

from functools import partial
from typing import Any

from completions import pipeline
from completions.budget import BudgetRefused
from completions.client import get_model, prompt_token_bound
from completions.models import Generation
from completions.schema import ParamsInvalid
from core.tokens import visible_text
from inspector import fullvocab, scoring, tokens


class Refusal(Exception):
    """Something to tell the user instead of sending the request."""


class BudgetRefusal(Refusal):
    """The scoring does not fit what is left of the month's budget (the page offers to
    ask for more: asked − left is what it lacked)."""

    def __init__(self, refused: BudgetRefused) -> None:
        super().__init__(refused.message)
        self.asked, self.left = refused.asked, refused.left


def run(user: Any, data: dict[str, Any], *, complete: Any = None) -> Generation:
    """run_now, with every way of not getting a result turned into a Refusal.
    `complete` reads the answer in place of the door's client.complete."""
    try:
        generation = pipeline.run_now(user, data, kind="inspect", complete=complete)
    except ParamsInvalid as exc:
        raise Refusal("; ".join(f"{e.field}: {e.message}" for e in exc.errors)) from None
    except BudgetRefused as exc:
        raise BudgetRefusal(exc) from None
    if generation.state != Generation.State.DONE:
        code = f" ({generation.error_code})" if generation.error_code else ""
        rid = f" — request id {generation.request_id}" if generation.request_id else ""
        raise Refusal(f"The backend did not score it{code}: {generation.error_message}{rid}")
    return generation


def keep(generation: Generation, target: dict[str, Any]) -> None:
    generation.target = target
    Generation.objects.filter(pk=generation.pk).update(target=target)


def score(user: Any, data: dict[str, Any]) -> Generation:
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
        text: str = data["text"]
        prompt = text
        tokenized = tokens.tokenize(model.id, text, add_special_tokens=special)
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
    generation = run(user, body, complete=reader)
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
    keep(generation, target)
    return generation


def choices(user: Any, data: dict[str, Any]) -> Generation:
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
    generation = run(
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
                "shown": visible_text(s.text),
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
    keep(generation, target)
    return generation


COMPARE_K = 5


def compare(user: Any, data: dict[str, Any]) -> Generation:
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
        generation = run(
            user, {**base, "model": sides[0][0].id, "prompt": [p + text for _, p in sides]}
        )
        plps = [c.get("prompt_logprobs") or [] for c in generation.choices]
    else:
        generation = run(user, {**base, "model": sides[0][0].id, "prompt": sides[0][1] + text})
        other = run(user, {**base, "model": sides[1][0].id, "prompt": sides[1][1] + text})
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
    keep(generation, target)
    return generation
