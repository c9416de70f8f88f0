"""Checks on what the Workbench and History pages receive, before anything is
stored or sent. The NUL check is Django's ProhibitNullCharactersValidator (the one
every forms.CharField runs): Postgres text and jsonb cannot hold U+0000, so a NUL
reaching an INSERT was a 500."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from django import forms
from django.core.validators import ProhibitNullCharactersValidator

from completions.schema import FieldError, ParamsInvalid

_no_nul = ProhibitNullCharactersValidator()


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


class PresetForm(forms.Form):
    preset_name = forms.CharField(max_length=100)


class SavedPromptForm(forms.Form):
    prompt_name = forms.CharField(max_length=200)
    prompt = forms.CharField(required=False, strip=False)


class SaveForm(forms.Form):
    """Save a finished run to History: which samples, a title and a note."""

    title = forms.CharField(required=False, max_length=200)
    note = forms.CharField(required=False, max_length=10_000)
    choice = forms.TypedMultipleChoiceField(required=False, coerce=int)

    def __init__(self, *args: Any, indexes: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choice = cast(forms.TypedMultipleChoiceField, self.fields["choice"])
        choice.choices = [(str(i), str(i)) for i in indexes]


class HistoryFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=500)
    model = forms.CharField(required=False, max_length=300)
    since = forms.DateField(required=False)
    until = forms.DateField(required=False)

    def filters(self) -> dict[str, Any]:
        """Run.objects.filtered's keywords: what is valid of the form (an invalid
        field filters nothing; the page shows why)."""
        self.is_valid()  # fills cleaned_data with the fields that are valid
        data = self.cleaned_data
        since: dt.date | None = data.get("since")
        until: dt.date | None = data.get("until")
        return {
            "query": (data.get("q") or "").strip(),
            "model": (data.get("model") or "").strip(),
            "since": since,
            "until": until,
        }
