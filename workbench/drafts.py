"""The Workbench draft: the form's values exactly as typed, kept server-side per user.

A draft stores text, not parameters: "abc" in max_tokens is kept as "abc" (the page
shows it again, with its error), because a draft that drops what it cannot parse loses
what was typed. Only what cannot be stored at all is refused (a NUL character, which
Postgres' jsonb cannot hold, or a value past the size caps), and then the whole save is
refused so the stored draft stays as it was.
"""

from __future__ import annotations

from typing import Any

from django import forms

from completions import kit
from workbench.models import Draft

# Generous: the request body is capped anyway (WEFT_MAX_REQUEST_BYTES); these keep one
# field from filling the row.
PROMPT_MAX = 1_000_000
FIELD_MAX = 10_000

TEXT_FIELDS = ["model", *(p.name for p in kit.PARAMS if p.kind != "bool"), *kit.STOP_SLOTS]
BOOL_FIELDS = [p.name for p in kit.PARAMS if p.kind == "bool"]


class DraftForm(forms.Form):
    """What the autosave posts: the Workbench form, plus `show` (a run to list on the
    page, when it was opened from a link) and the save's number: `draft_page` (a random
    id per page load) and `draft_seq` (1, 2, … on that page), which
    Draft.update_values orders saves by."""

    prompt = forms.CharField(required=False, strip=False, max_length=PROMPT_MAX)
    show = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    draft_page = forms.CharField(required=False, max_length=64)
    draft_seq = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in TEXT_FIELDS:
            self.fields[name] = forms.CharField(required=False, strip=False, max_length=FIELD_MAX)

    def values(self) -> dict[str, Any]:
        """The values sent (a field the post does not name keeps its stored value)."""
        data = self.cleaned_data
        out: dict[str, Any] = {
            name: data[name] for name in ["prompt", *TEXT_FIELDS] if name in self.data
        }
        for name in BOOL_FIELDS:
            # A checkbox is sent only when ticked; its hidden marker says it was on the form.
            if f"{name}__present" in self.data:
                out[name] = name in self.data
        return out


def sequence(form: DraftForm) -> dict[str, Any]:
    """The save's number, as Draft.update_values takes it (none: an unnumbered save)."""
    page, seq = form.cleaned_data.get("draft_page"), form.cleaned_data.get("draft_seq")
    return {"page": page, "seq": seq} if page and seq else {}


def page_values(draft: Draft) -> dict[str, Any]:
    """The form's values: a fresh page's, overridden by what the draft holds."""
    values = kit.form_values({})
    for name, value in (draft.values or {}).items():
        if name in values and isinstance(value, bool | str):
            values[name] = value
    return values
