"""The Loom's small forms. Every text a user sends goes through a Django
CharField, whose ProhibitNullCharactersValidator is the one NUL check: Postgres
text cannot hold U+0000, so without it a NUL became a 500 at the INSERT."""

from __future__ import annotations

from django import forms

from loom.context import MAX_DEPTH
from loom.models import TAG_MAX, ChildOrder, NoteUnit, WriteMode

TITLE_MAX = 200  # Tree.title's column
QUERY_MAX = 500


class NewTreeForm(forms.Form):
    prompt = forms.CharField(
        strip=False, error_messages={"required": "Write a prompt to start a tree from."}
    )
    title = forms.CharField(required=False, max_length=TITLE_MAX)

    def clean_prompt(self) -> str:
        prompt = self.cleaned_data["prompt"]
        if not prompt.strip():
            raise forms.ValidationError("Write a prompt to start a tree from.")
        return prompt


class TitleForm(forms.Form):
    title = forms.CharField(max_length=TITLE_MAX)


class TextForm(forms.Form):
    """A node's text (add a child, edit)."""

    text = forms.CharField(required=False, strip=False)


class TagForm(forms.Form):
    tag = forms.CharField(required=False, max_length=TAG_MAX * 4)


class WriteModeForm(forms.Form):
    mode = forms.ChoiceField(choices=WriteMode.choices)


class ContextForm(forms.Form):
    """The tree's memory and author's note (loom/context.py)."""

    memory = forms.CharField(required=False, strip=False, max_length=20_000)
    note = forms.CharField(required=False, strip=False, max_length=5_000)
    note_depth = forms.IntegerField(min_value=0, max_value=MAX_DEPTH)
    note_unit = forms.ChoiceField(choices=NoteUnit.choices)


class ExpandForm(forms.Form):
    """How far an automatic expansion grows (loom/expansion.py bounds it)."""

    depth = forms.IntegerField(min_value=1, max_value=6)
    breadth = forms.IntegerField(min_value=1, max_value=8)
    keep = forms.IntegerField(required=False, min_value=1, max_value=8)


class ChildOrderForm(forms.Form):
    order = forms.ChoiceField(choices=ChildOrder.choices)
    hide_down = forms.BooleanField(required=False)


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=QUERY_MAX)
    whole = forms.BooleanField(required=False)  # whole words only


class ExportForm(forms.Form):
    node = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)


class ShareForm(forms.Form):
    """The share dialog's "add a person" (also changes the role of one already in)."""

    username = forms.CharField(
        max_length=150,
        error_messages={"required": "Write the username of the person to share with."},
    )
    role = forms.ChoiceField(
        choices=[("editor", "editor"), ("viewer", "viewer")],
        error_messages={"invalid_choice": "Choose a role: editor or viewer."},
    )
