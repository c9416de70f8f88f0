"""The three Inspect forms. Model choices come from the backend's model list at
request time, so they are filled in by the view."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from django import forms
from django.core.validators import MinValueValidator

from completions.forms import CheckField, ParamField
from completions.schema import ModelInfo
from inspector.tokens import MAX_TOKEN_ID

MAX_CHOICES = 16
_ID_SPLIT = re.compile(r"[\s,\[\]]+")


def parse_token_ids(raw: str) -> list[int]:
    """'1, 2, 3' or '[1, 2, 3]' -> [1, 2, 3]; raises ValidationError naming the bad part."""
    parts = [p for p in _ID_SPLIT.split(raw.strip()) if p]
    ids = []
    for part in parts:
        if not re.fullmatch(r"-?\d+", part):
            raise forms.ValidationError(f"“{part[:20]}” is not a token id: give integers only.")
        # Checked on the digits: int() of thousands of them is refused (or slow).
        if len(part.lstrip("-")) > len(str(MAX_TOKEN_ID)) or abs(int(part)) > MAX_TOKEN_ID:
            raise forms.ValidationError(
                f"“{part[:20]}” is larger than any model's vocabulary "
                f"(token ids are below {MAX_TOKEN_ID + 1:,})."
            )
        ids.append(int(part))
    return ids


class _ModelForm(forms.Form):
    model = forms.ChoiceField(label="Model")
    add_special_tokens = CheckField(
        "add_special_tokens",
        label="add_special_tokens (the tokenizer's own, e.g. a BOS)",
        initial=True,
    )

    def __init__(
        self,
        *args: Any,
        models: Sequence[ModelInfo] = (),
        default_model: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.models = {m.id: m for m in models}
        cast(forms.ChoiceField, self.fields["model"]).choices = [(m.id, m.id) for m in models]
        if default_model:
            self.fields["model"].initial = default_model


class ScoreForm(_ModelForm):
    source = forms.ChoiceField(
        label="Input",
        choices=[("text", "Text"), ("ids", "Token ids")],
        initial="text",
        widget=forms.RadioSelect,
    )
    text = forms.CharField(
        label="Text to score", required=False, strip=False, widget=forms.Textarea(attrs={"rows": 6})
    )
    token_ids = forms.CharField(
        label="Token ids", required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    # The door's prompt_logprobs (its -1, the full vocabulary, is the checkbox below).
    k = ParamField(
        "prompt_logprobs",
        label="Alternatives per position (k)",
        required=True,
        initial=5,
        validators=[MinValueValidator(0, "must be greater than or equal to 0")],
    )
    full_vocab = forms.BooleanField(label="Full vocabulary (entropy, exact rank)", required=False)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        model = self.models.get(data.get("model") or "")
        k = data.get("k")
        if model is not None and k is not None and not data.get("full_vocab"):
            if k > model.max_logprobs:  # the per-model cap, next to the field
                self.add_error("k", f"must be at most {model.max_logprobs} for model {model.id}")
        if data.get("source") == "ids":
            try:
                data["ids"] = parse_token_ids(data.get("token_ids") or "")
            except forms.ValidationError as exc:
                self.add_error("token_ids", exc)
                return data
            if not data["ids"]:
                self.add_error("token_ids", "Give at least one token id.")
        elif not data.get("text"):
            if data.get("add_special_tokens"):
                self.add_error("text", "Enter a text to score.")
            else:
                self.add_error(
                    "text",
                    "Empty text with add_special_tokens off has no tokens at all: "
                    "enter a text (or turn add_special_tokens on).",
                )
        return data


class ChoicesForm(_ModelForm):
    # A field named like BaseForm.prefix (the form's own name prefix, str | None): Django's
    # metaclass takes declared fields off the class, so that attribute is untouched, and
    # templates reach this field as form["prefix"].
    prefix = forms.CharField(  # type: ignore[assignment]
        label="Shared prefix", strip=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    candidates = forms.CharField(
        label=f"Candidate continuations, one per line (up to {MAX_CHOICES}; leading spaces count)",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 5}),
    )

    def clean_candidates(self) -> list[str]:
        lines = [line.rstrip("\r") for line in self.cleaned_data["candidates"].split("\n")]
        candidates = [line for line in lines if line.strip()]
        if len(candidates) < 2:
            raise forms.ValidationError("Give at least two candidates, one per line.")
        if len(candidates) > MAX_CHOICES:
            raise forms.ValidationError(
                f"At most {MAX_CHOICES} candidates ({len(candidates)} given)."
            )
        return candidates


class CompareForm(_ModelForm):
    text = forms.CharField(
        label="Text to compare", strip=False, widget=forms.Textarea(attrs={"rows": 4})
    )
    model_b = forms.ChoiceField(label="Model B")
    prefix_a = forms.CharField(
        label="Prefix A", required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    prefix_b = forms.CharField(
        label="Prefix B", required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(
        self,
        *args: Any,
        models: Sequence[ModelInfo] = (),
        default_model: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, models=models, default_model=default_model, **kwargs)
        self.fields["model"].label = "Model A"
        cast(forms.ChoiceField, self.fields["model_b"]).choices = cast(
            forms.ChoiceField, self.fields["model"]
        ).choices
        if default_model:
            self.fields["model_b"].initial = default_model

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if (
            data.get("model") == data.get("model_b")
            and data.get("prefix_a", "") == data.get("prefix_b", "")
            and "text" in data
        ):
            raise forms.ValidationError(
                "Compare needs two different models or two different prefixes."
            )
        return data


class SaveForm(forms.Form):
    """Save to History: the entry's title (a CharField: no NUL, which Postgres cannot store)."""

    title = forms.CharField(required=False, max_length=200)
