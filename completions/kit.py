"""The generation UI kit's parameter panel, one for every page that sends a request
(the Workbench, Batch): which of the door's parameters a page shows, what a fresh page
holds, the seed's defaults (shown in the help; every parameter is sent, defaults
included, so what a run records is its whole request), the model-dependent help
(completions.hints) and what cannot be stored. Parsing, bounds and the door's rules are
the shared form's (completions.forms.ParamsForm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.validators import ProhibitNullCharactersValidator

from completions.forms import BOUNDS, PAGE_CHECKS, PAGE_NUMBERS, STOP_SLOTS, ParamsForm, help_text
from completions.forms import escape_stop as escape_stop
from completions.hints import model_hints
from completions.schema import FieldError, ModelInfo, ParamsInvalid

# Postgres text and jsonb cannot hold U+0000: Django's own check (the one every
# forms.CharField runs), for the fields a page reads without a form.
_no_nul = ProhibitNullCharactersValidator()


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "int" | "float" | "bool", from the schema
    default: Any  # the seed's default; None = unset
    initial: Any  # what a fresh Workbench shows
    help: str = ""

    @property
    def label(self) -> str:
        return self.name


# name: (seed default, initial, what the help adds to the schema's range)
_UI: dict[str, tuple[Any, Any, str]] = {
    "max_tokens": (None, 64, "n × max_tokens ≤ 32,000"),
    "n": (1, 1, "samples"),
    "temperature": (1.0, 1.0, "default 1 (0 = greedy)"),
    "top_p": (1.0, 1.0, "default 1"),
    "top_k": (-1, -1, "-1 = off"),
    "min_p": (0.0, 0.0, "default 0"),
    "presence_penalty": (0.0, 0.0, "default 0"),
    "frequency_penalty": (0.0, 0.0, "default 0"),
    "repetition_penalty": (1.0, 1.0, "default 1"),
    "seed": (None, None, "empty = random"),
    "logprobs": (None, None, "top-k alternatives per token, empty = off"),
    "echo": (False, False, "prepend the prompt to each sample"),
    "add_special_tokens": (True, True, "prepend BOS (leave on for plain text)"),
}


def _help(name: str, extra: str) -> str:
    span = help_text(name)
    return f"{span}; {extra}" if span and extra else span or extra


PARAMS: list[Param] = [
    Param(name, BOUNDS[name].kind, _UI[name][0], _UI[name][1], _help(name, _UI[name][2]))
    for name in [*PAGE_NUMBERS, *PAGE_CHECKS]
]  # fmt: skip
BY_NAME = {p.name: p for p in PARAMS}
# Params a preset / saved prompt stores besides the prompt.
STORED = ["model", "stop", *BY_NAME]


def parse(
    post: Any, *, with_prompt: bool = True, model_info: Any = None
) -> tuple[dict[str, Any], ParamsInvalid | None, ModelInfo | None]:
    """The door's request dict from the Workbench form, every error (the fields' own
    and the door's) as one ParamsInvalid, and the chosen model's info."""
    form = ParamsForm(post, names=BY_NAME, with_prompt=with_prompt, model_info=model_info)
    invalid = None
    if not form.is_valid():
        invalid = ParamsInvalid(
            [
                FieldError(e.code or "invalid", "general" if name == "__all__" else name, str(m))
                for name, errors in form.errors.as_data().items()
                for e in errors
                for m in e.messages
            ]
        )
    # Every parameter the form shows is sent, defaults included: what is recorded (and
    # shown by View code, Compare, History and its exports) is then the whole request,
    # never "whatever the backend's defaults were".
    return form.request_body(), invalid, form.info


def form_values(body: dict[str, Any] | None) -> dict[str, Any]:
    """Values for the form's inputs from a stored request body (a preset, a saved
    prompt, a History run); anything missing shows the Workbench's initial value."""
    body = body or {}
    values: dict[str, Any] = {"model": body.get("model") or "", "prompt": ""}
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        values["prompt"] = prompt
    for param in PARAMS:
        value = body[param.name] if param.name in body else param.initial
        if param.kind == "bool":
            values[param.name] = bool(value)
        else:
            values[param.name] = "" if value is None else value
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    for i, slot in enumerate(STOP_SLOTS):
        values[slot] = escape_stop(stop[i]) if i < len(stop) else ""
    return values


def stored_params(data: dict[str, Any]) -> dict[str, Any]:
    """The part of a request dict a preset keeps (everything but the prompt)."""
    return {k: v for k, v in data.items() if k in STORED}


def check_text(post: Any) -> ParamsInvalid | None:
    """Posted values that cannot be stored, as the door's ParamsInvalid, so the
    page shows each message next to its field. Every field counts: a number
    field's text that is not a number is passed on as text (for the door to
    name), and a preset or a Loom tree would store it."""
    errors = []
    for name in post:
        try:
            for item in post.getlist(name):
                _no_nul(item)
        except forms.ValidationError as exc:
            slot = "stop" if name.startswith("stop_") else name
            errors.append(FieldError("invalid_value", slot, exc.messages[0]))
    return ParamsInvalid(errors) if errors else None


def _default_model(models: list[ModelInfo]) -> str:
    for model in models:
        if model.default:
            return model.id
    return models[0].id if models else ""


def params_context(values: dict[str, Any], models: list[ModelInfo], model_error: str) -> dict:
    """What the parameter panel's partial shows: each field with its value and help."""
    chosen = values.get("model") or _default_model(models)
    info = next((m for m in models if m.id == chosen), None)
    hints = model_hints(info)
    fields = [
        {"p": p, "value": values.get(p.name), "help": hints.get(p.name, p.help)} for p in PARAMS
    ]
    return {
        "values": values,
        "fields": fields,
        "stops": [(slot, values.get(slot, "")) for slot in STOP_SLOTS],
        "models": models,
        "model_ids": [m.id for m in models],
        "chosen_model": chosen,
        "model_error": model_error,
    }
