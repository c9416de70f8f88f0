from django import forms


class KeyForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        strip=True,
        help_text="What the key is for, e.g. “eval scripts” — shown in the list, never secret.",
    )
