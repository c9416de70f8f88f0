"""The Workbench's and History's own forms. What a page reads without a form is checked
for what cannot be stored by completions.kit.check_text (a NUL reaching an INSERT was
a 500)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from django import forms


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
