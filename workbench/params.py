"""The Workbench's parameter form: one spec per seed parameter (bounds, defaults,
HTML attributes), turning a POSTed form into the door's request dict and a stored
request body back into form values.

The door (completions.schema.validate_params) is the only judge of validity: this
module converts what it can and passes anything it cannot convert through
unchanged, so the door's FieldError names the field and the page shows it there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from completions.schema import MAX_OUTPUT_WORK, MAX_SEED, MAX_STOP


@dataclass(frozen=True)
class Param:
    name: str
    label: str
    kind: str  # "int" | "float" | "bool"
    default: Any  # the seed's default; None = unset
    initial: Any  # what a fresh Workbench shows
    min: Any = None
    max: Any = None
    step: str = "any"
    help: str = ""
    # Sent even when equal to the seed default (the seed says to always set these).
    always: bool = False


PARAMS: list[Param] = [
    Param("max_tokens", "max_tokens", "int", None, 64, 1, MAX_OUTPUT_WORK, "1",
          "1 – 32,000; n × max_tokens ≤ 32,000", always=True),
    Param("n", "n", "int", 1, 1, 1, 16, "1", "samples, 1 – 16"),
    Param("temperature", "temperature", "float", 1.0, 1.0, 0, 100, "any",
          "0 – 100, default 1 (0 = greedy)"),
    Param("top_p", "top_p", "float", 1.0, 1.0, 0, 1, "any", "0 < p ≤ 1, default 1"),
    Param("top_k", "top_k", "int", -1, -1, -1, None, "1", "-1 (off) or ≥ 1"),
    Param("min_p", "min_p", "float", 0.0, 0.0, 0, 1, "any", "0 – 1, default 0"),
    Param("presence_penalty", "presence_penalty", "float", 0.0, 0.0, -2, 2, "any",
          "-2 – 2, default 0"),
    Param("frequency_penalty", "frequency_penalty", "float", 0.0, 0.0, -2, 2, "any",
          "-2 – 2, default 0"),
    Param("repetition_penalty", "repetition_penalty", "float", 1.0, 1.0, 0, 2, "any",
          "0 < x ≤ 2, default 1"),
    Param("seed", "seed", "int", None, None, 0, MAX_SEED, "1", "0 – 2⁶³−1, empty = random"),
    Param("logprobs", "logprobs", "int", None, None, 0, 100, "1",
          "top-k alternatives per token, empty = off"),
    Param("echo", "echo", "bool", False, False, help="prepend the prompt to each sample"),
    Param("add_special_tokens", "add_special_tokens", "bool", True, True,
          help="prepend BOS (leave on for plain text)"),
]  # fmt: skip
BY_NAME = {p.name: p for p in PARAMS}
# Params a preset / saved prompt stores besides the prompt.
STORED = ["model", "stop", *BY_NAME]
STOP_SLOTS = [f"stop_{i}" for i in range(1, MAX_STOP + 1)]


def _number(raw: str, kind: str) -> Any:
    """The number a field holds, or the raw text when it is not one (the door then
    reports invalid_type for that field)."""
    try:
        value = int(raw) if kind == "int" else float(raw)
    except ValueError:
        if kind == "int":
            # "3.0" in an integer field is a typo worth accepting; "3.5" is not.
            try:
                as_float = float(raw)
            except ValueError:
                return raw
            if not math.isfinite(as_float):
                return raw
            return int(as_float) if as_float.is_integer() else as_float
        return raw
    if kind == "float" and not math.isfinite(value):
        return raw  # "inf", "nan", "1e309": not numbers JSON (or the door) can take
    if kind == "float" and value.is_integer():
        value = float(value)
    return value


def unescape_stop(text: str) -> str:
    """Stop strings are typed in one-line inputs: \\n and \\t stand for a newline
    and a tab, \\\\ for a backslash."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in "nt\\":
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[text[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def escape_stop(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def request_from_form(post: Any, *, with_prompt: bool = True) -> dict[str, Any]:
    """The door's request dict from the Workbench form. Fields left empty or at the
    seed's default are omitted, so the request (and View code) says only what matters."""
    data: dict[str, Any] = {}
    model = (post.get("model") or "").strip()
    if model:
        data["model"] = model
    if with_prompt:
        data["prompt"] = post.get("prompt", "")
    for param in PARAMS:
        if param.kind == "bool":
            # A checkbox is absent when unticked; the hidden "<name>__present" marker
            # tells "unticked" from "not on this form".
            if f"{param.name}__present" not in post and param.name not in post:
                continue
            value = post.get(param.name) in ("on", "true", "1")
            if value != param.default:
                data[param.name] = value
            continue
        raw = (post.get(param.name) or "").strip()
        if raw == "":
            continue
        value = _number(raw, param.kind)
        if value == param.default and not param.always and type(value) is not str:
            continue
        data[param.name] = value
    stops = [unescape_stop(post.get(slot, "")) for slot in STOP_SLOTS]
    stops = [s for s in stops if s != ""]
    if stops:
        data["stop"] = stops
    return data


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
