from django.contrib import admin, messages

from feedback import grants
from feedback.models import BudgetRequest, Feedback


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "owner",
        "created_at",
        "short_message",
        "page_url",
        "request_id",
        "resolved",
    ]
    list_editable = ["resolved"]
    list_filter = ["resolved", "created_at"]
    search_fields = ["owner__username", "message", "request_id", "page_url"]
    readonly_fields = ["owner", "created_at", "message", "page_url", "reported_at", "request_id"]
    fields = [*readonly_fields, "resolved", "reply"]

    def has_add_permission(self, request) -> bool:
        return False  # users send it from the Feedback button

    @admin.display(description="message")
    def short_message(self, item: Feedback) -> str:
        return item.message[:80] + ("…" if len(item.message) > 80 else "")


@admin.register(BudgetRequest)
class BudgetRequestAdmin(admin.ModelAdmin):
    list_display = ["id", "owner", "target", "amount", "short_reason", "state", "created_at",
                    "decided_by", "budget_after"]  # fmt: skip
    list_filter = ["state", "created_at"]
    search_fields = ["owner__username", "reason", "key__prefix"]
    readonly_fields = ["owner", "key", "amount", "reason", "state", "created_at", "decided_at",
                       "decided_by", "budget_before", "budget_after"]  # fmt: skip
    fields = [*readonly_fields, "reply"]
    actions = ["approve", "decline"]

    def has_add_permission(self, request) -> bool:
        return False  # users ask from a refusal, the Usage page or a key's row

    @admin.display(description="reason")
    def short_reason(self, item: BudgetRequest) -> str:
        return item.reason[:80] + ("…" if len(item.reason) > 80 else "")

    def _decide(self, request, queryset, decide, verb: str) -> None:
        done = own = 0
        for item in queryset:
            try:
                done += decide(item, request.user)
            except grants.OwnRequest:
                own += 1
        skipped = queryset.count() - done - own
        self.message_user(
            request, f"{verb} {done} request{'s' if done != 1 else ''}.", messages.SUCCESS
        )
        if own:
            self.message_user(
                request,
                f"{own} {'was' if own == 1 else 'were'} your own: another member of staff "
                "decides those (you can withdraw yours on the Usage page).",
                messages.ERROR,
            )
        if skipped:
            self.message_user(
                request,
                f"{skipped} had an answer already and were left as they were.",
                messages.WARNING,
            )

    # Deciding changes a row: a staff user who may only view budget requests may not.
    @admin.action(description="Approve: add each amount to its budget", permissions=["change"])
    def approve(self, request, queryset) -> None:
        self._decide(request, queryset, grants.approve, "Approved")

    @admin.action(description="Decline the selected requests", permissions=["change"])
    def decline(self, request, queryset) -> None:
        self._decide(request, queryset, grants.decline, "Declined")
