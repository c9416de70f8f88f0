from django.contrib import admin

from api.models import ApiKey


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    # The secret is never here: only its public prefix; the hash is not even shown.
    list_display = [
        "name",
        "prefix",
        "user",
        "monthly_budget",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "user__username"]
    fields = [
        "user",
        "name",
        "prefix",
        "monthly_budget",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    readonly_fields = ["user", "prefix", "created_at", "last_used_at"]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        # A key is made where its secret can be shown once: the API keys page or
        # `manage.py weft_api_key create`.
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # A key's budget is a grant: staff do not raise their own (feedback.grants),
        # here no more than through a budget request. Revoking stays theirs (the action
        # asks the model's change permission, obj=None).
        if obj is not None and obj.user_id == request.user.pk and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    # Revoking changes a key: a staff user who may only view keys may not.
    @admin.action(description="Revoke the selected keys", permissions=["change"])
    def revoke(self, request, queryset) -> None:
        for key in queryset.active():
            key.revoke()
