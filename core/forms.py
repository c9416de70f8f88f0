"""Small form helpers every page uses."""

from __future__ import annotations

from django import forms


def first_error(form: forms.Form) -> str:
    """One line naming the field and what is wrong with it."""
    for name, errors in form.errors.items():
        label = "" if name == "__all__" else f"{name}: "
        return f"{label}{errors[0]}"
    return ""
