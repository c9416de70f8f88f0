"""The Workbench's parameter fields: which of the door's parameters it shows, what a
fresh page holds, and the seed's defaults (shown in the help; every parameter is sent,
defaults included, so what a run records is its whole request). Parsing, bounds and
the door's rules are the shared form's (completions.forms.ParamsForm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from completions.forms import BOUNDS, PAGE_CHECKS, PAGE_NUMBERS, STOP_SLOTS, ParamsForm, help_text
from completions.forms import escape_stop as escape_stop
from completions.schema import FieldError, ModelInfo, ParamsInvalid

__all__ = ["PARAMS", "BY_NAME", "STOP_SLOTS", "parse", "form_values", "stored_params"]


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
