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

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset) -> None:
        for key in queryset.active():
            key.revoke()
