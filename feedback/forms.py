from __future__ import annotations

from datetime import datetime

from django import forms
from django.utils import timezone

from feedback.models import AMOUNT_MAX, MESSAGE_MAX, BudgetRequest, Feedback


class FeedbackForm(forms.ModelForm):
    class Meta:
        model = Feedback
        fields = ["message", "page_url", "reported_at", "request_id"]
        widgets = {
            "message": forms.Textarea(attrs={"rows": 5, "maxlength": MESSAGE_MAX}),
            "page_url": forms.TextInput(),
            "reported_at": forms.DateTimeInput(format="%Y-%m-%d %H:%M:%S"),
        }
        labels = {"message": "What happened, or what would help?"}
        help_texts = {
            "page_url": "Filled in: the page you were on. Edit or clear it as you like.",
            "reported_at": "Filled in: now. Change it to when the problem happened.",
            "request_id": "Filled in: the X-Request-Id of your latest request (a run, a "
            "scoring or an API call), so we can find it in our logs.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reported_at"].required = False  # cleared: now

    def clean_reported_at(self) -> datetime:
        return self.cleaned_data.get("reported_at") or timezone.now()


class BudgetRequestForm(forms.ModelForm):
    amount = forms.IntegerField(
        min_value=1,
        max_value=AMOUNT_MAX,
        label="Tokens a month to add",
        widget=forms.TextInput(attrs={"inputmode": "numeric"}),
    )

    class Meta:
        model = BudgetRequest
        fields = ["amount", "reason"]
        widgets = {"reason": forms.Textarea(attrs={"rows": 4, "maxlength": MESSAGE_MAX})}
        labels = {"reason": "What is it for?"}
