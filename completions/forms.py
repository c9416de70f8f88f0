"""The door's parameters as Django form fields: one layer for every page that sends a
generation (the Workbench, the Loom's generation settings, Inspect).

Types and bounds come from the request schema (CompletionParams' JSON schema), never
typed again here. A field parses what the browser sent — the raw text, since the inputs
are `type="text"` (a `type="number"` input sends "" for "abc" and the value would be
silently dropped) — and checks the schema's bounds; `ParamsForm.clean()` then asks the
door (validate_params) for the cross-field and per-model rules, and every error lands on
its own field, all at once.

Stop strings are typed in one-line inputs, one rule everywhere: \\n and \\t stand for a
newline and a tab, \\\\ for a backslash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django import forms

from completions import pipeline
from completions.client import get_model
from completions.errors import BackendError
from completions.schema import (
    MAX_STOP,
    CompletionParams,
    ModelInfo,
    ParamsInvalid,
    validate_params,
)


@dataclass(frozen=True)
class Bounds:
    kind: str  # "int" | "float" | "bool"
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False

    def describe(self) -> str:
        """'0 – 100', '0 < x ≤ 1', '≥ -1': the range as a help text shows it."""
        low, high = _num(self.min), _num(self.max)
        if self.min is not None and self.max is not None:
            if self.min_exclusive or self.max_exclusive:
                lo_op = "<" if self.min_exclusive else "≤"
                hi_op = "<" if self.max_exclusive else "≤"
                return f"{low} {lo_op} x {hi_op} {high}"
            return f"{low} – {high}"
        if self.min is not None:
            return f"{'>' if self.min_exclusive else '≥'} {low}"
        if self.max is not None:
            return f"{'<' if self.max_exclusive else '≤'} {high}"
        return ""


def _num(value: float | None) -> str:
    if value is None:
        return ""
    if float(value).is_integer():
        return f"{int(value):,}" if abs(value) < 10**12 else str(int(value))
    return str(value)


def _schema_bounds() -> dict[str, Bounds]:
    kinds = {"integer": "int", "number": "float", "boolean": "bool"}
    out: dict[str, Bounds] = {}
    for name, prop in CompletionParams.model_json_schema()["properties"].items():
        for option in prop.get("anyOf", [prop]):
            kind = kinds.get(option.get("type", ""))
            if kind is None:
                continue
            low, high = option.get("minimum"), option.get("maximum")
            ex_low, ex_high = option.get("exclusiveMinimum"), option.get("exclusiveMaximum")
            out[name] = Bounds(
                kind,
                low if ex_low is None else ex_low,
                high if ex_high is None else ex_high,
                min_exclusive=ex_low is not None,
                max_exclusive=ex_high is not None,
            )
            break
    return out


BOUNDS = _schema_bounds()
STOP_SLOTS = [f"stop_{i}" for i in range(1, MAX_STOP + 1)]


def unescape_stop(text: str) -> str:
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


class ParamField(forms.Field):
    """A numeric parameter: the raw text parsed as the schema's type, then its bounds.
    "3.0" in an integer field is a typo worth accepting; "3.5", "abc", "1e", "nan" and
    "1e309" (infinite) are errors that name the text."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.bounds = BOUNDS[name]
        mode = "numeric" if self.bounds.kind == "int" else "decimal"
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.TextInput(attrs={"inputmode": mode}))
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> int | float | None:
        raw = ("" if value is None else str(value)).strip()
        if raw == "":
            return None
        kind = "an integer" if self.bounds.kind == "int" else "a number"
        try:
            number = float(raw)
        except ValueError:
            number = None
        if number is None or number != number or number in (float("inf"), float("-inf")):
            raise forms.ValidationError(f"{raw[:40]!r} is not {kind}", code="invalid")
        if self.bounds.kind == "float":
            return number
        try:
            return int(raw)
        except ValueError:
            if number.is_integer() and abs(number) < 2**53:
                return int(number)
            raise forms.ValidationError(f"{raw[:40]!r} is not {kind}", code="invalid") from None

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value is None:
            return
        b = self.bounds
        if b.min is not None and (value <= b.min if b.min_exclusive else value < b.min):
            word = "greater than" if b.min_exclusive else "greater than or equal to"
            raise forms.ValidationError(f"must be {word} {_num(b.min)}", code="out_of_range")
        if b.max is not None and (value >= b.max if b.max_exclusive else value > b.max):
            word = "less than" if b.max_exclusive else "less than or equal to"
            raise forms.ValidationError(f"must be {word} {_num(b.max)}", code="out_of_range")


class CheckField(forms.BooleanField):
    """A boolean parameter as a checkbox."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        assert BOUNDS[name].kind == "bool", name
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)


class StopWidget(forms.MultiWidget):
    def __init__(self) -> None:
        widgets: dict[str, forms.Widget | type[forms.Widget]] = {
            slot.removeprefix("stop_"): forms.TextInput() for slot in STOP_SLOTS
        }
        super().__init__(widgets)

    def decompress(self, value: Any) -> list[str]:
        stops = [value] if isinstance(value, str) else list(value or [])
        return [escape_stop(s) for s in stops] + [""] * (MAX_STOP - len(stops))


class StopField(forms.MultiValueField):
    """Up to MAX_STOP one-line inputs named stop_1 … stop_N, escaped as above."""

    def __init__(self, **kwargs: Any) -> None:
        fields = [forms.CharField(required=False, strip=False) for _ in STOP_SLOTS]
        kwargs.setdefault("required", False)
        super().__init__(fields, widget=StopWidget(), require_all_fields=False, **kwargs)

    def compress(self, data_list: list[str]) -> list[str]:
        return [unescape_stop(s) for s in data_list or [] if s]


NUMBERS = [name for name, b in BOUNDS.items() if b.kind in ("int", "float")]
CHECKS = [name for name, b in BOUNDS.items() if b.kind == "bool"]
# What a page lets a user set (stream, stream_options and prompt_logprobs are the
# pages' own business; prompt_logprobs is Inspect's k).
PAGE_NUMBERS = [n for n in NUMBERS if n != "prompt_logprobs"]
PAGE_CHECKS = ["echo", "add_special_tokens"]


class ParamsForm(forms.Form):
    """The generation parameters a page shows, as one form. `names` chooses them;
    `model_info` looks up a model id (None when the backend does not know it) so the
    door's per-model caps apply. `request_body()` is what the door gets: empty fields
    and unticked checkboxes left out (the backend's default applies)."""

    model = forms.CharField(required=False, max_length=300)
    prompt = forms.CharField(required=False, strip=False)
    stop = StopField()

    def __init__(
        self,
        data: Any = None,
        *,
        names: Iterable[str] = (*PAGE_NUMBERS, *PAGE_CHECKS),
        with_prompt: bool = True,
        base: dict[str, Any] | None = None,
        model_info: Callable[[str], ModelInfo | None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data, **kwargs)
        self.base = dict(base or {})
        self.model_info = model_info
        self.info: ModelInfo | None = None
        self.checked: tuple[CompletionParams, ModelInfo] | None = None
        if not with_prompt:
            del self.fields["prompt"]
        for name in names:
            field = CheckField(name) if BOUNDS[name].kind == "bool" else ParamField(name)
            self.fields[name] = field

    def _body(self) -> dict[str, Any]:
        data = dict(self.base)
        for name, value in self.cleaned_data.items():
            if name in ("model", "prompt"):
                if name == "prompt" or value.strip():
                    data[name] = value if name == "prompt" else value.strip()
            elif name == "stop":
                if value:
                    data["stop"] = value
            elif isinstance(self.fields[name], CheckField):
                # An unticked checkbox is absent; the hidden "<name>__present" marker
                # tells "unticked" from "not on this form".
                if self.data.get(f"{name}__present") or name in self.data:
                    data[name] = value
            elif value is not None:
                data[name] = value
        return data

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        body = self._body()
        if "prompt" not in self.fields:
            body.setdefault("prompt", "")
        if self.model_info is not None:
            self.info = self.model_info(body.get("model", ""))
        try:
            checked = validate_params(body, model=self.info)
            if self.info is not None:  # checked against its model: the door takes it as is
                self.checked = (checked, self.info)
        except ParamsInvalid as exc:
            for error in exc.errors:
                field = error.field.split(".")[0]
                if field in self.errors:
                    continue  # its own field's error says it first
                if field in self.fields:
                    self.add_error(field, forms.ValidationError(error.message, code=error.code))
                else:  # a value from `base`, or a rule of the whole body
                    self.add_error(None, f"{error.field}: {error.message}")
        return cleaned

    def request_body(self) -> dict[str, Any]:
        """The door's request dict (only after is_valid())."""
        body = self._body()
        if "prompt" not in self.fields:
            body.pop("prompt", None)
        elif self.checked is not None and not self.errors:
            return pipeline.Checked(body, *self.checked)
        return body

    def error_list(self) -> list[tuple[str, str]]:
        """(field, message) for every error, in field order."""
        return [(name, str(message)) for name, errors in self.errors.items() for message in errors]


def lookup_model(model_id: str) -> ModelInfo | None:
    """The backend's entry for a model id ("" = the default), or None when the backend
    cannot say (the door checks again when the run starts)."""
    try:
        return get_model(model_id or None)
    except BackendError:
        return None


def help_text(name: str) -> str:
    """The schema's range for a parameter, as its help shows it."""
    return BOUNDS[name].describe()
