from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from completions.models import BudgetMonth, DailyUsage, Generation, TokenBudget


def _own_budget(request, user_id: int | None) -> bool:
    """Staff do not raise their own budget (feedback.grants refuses their own request
    for the same reason); a superuser runs the site and may."""
    return user_id is not None and user_id == request.user.pk and not request.user.is_superuser


@admin.register(TokenBudget)
class TokenBudgetAdmin(admin.ModelAdmin):
    list_display = ["user", "monthly_tokens"]
    search_fields = ["user__username"]
    autocomplete_fields = ["user"]

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is not None and _own_budget(request, obj.user_id):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and _own_budget(request, obj.user_id):
            return False
        return super().has_delete_permission(request, obj)


@admin.register(BudgetMonth)
class BudgetMonthAdmin(admin.ModelAdmin):
    list_display = ["user", "month", "used", "reserved"]
    list_filter = ["month"]
    readonly_fields = ["user", "month", "used", "reserved"]


@admin.register(DailyUsage)
class DailyUsageAdmin(admin.ModelAdmin):
    list_display = ["user", "day", "prompt_tokens", "completion_tokens", "runs"]
    readonly_fields = ["user", "day", "prompt_tokens", "completion_tokens", "runs"]


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    # Metadata only: the admin list never shows prompt or completion text.
    list_display = ["id", "owner", "kind", "state", "charged_tokens", "created_at", "expires_at"]
    list_filter = ["state", "kind"]
    readonly_fields = [f.name for f in Generation._meta.fields]


class TokenBudgetInline(admin.StackedInline):
    model = TokenBudget
    extra = 1
    max_num = 1
    verbose_name = "monthly token budget override"
    verbose_name_plural = "monthly token budget override (empty: the default from settings)"

    # `obj` is the user whose page this is.
    def has_add_permission(self, request, obj=None) -> bool:
        if obj is not None and _own_budget(request, obj.pk):
            return False
        return super().has_add_permission(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is not None and _own_budget(request, obj.pk):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and _own_budget(request, obj.pk):
            return False
        return super().has_delete_permission(request, obj)


# The override is edited where an admin looks for a user: on the user's own page.
User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class WeftUserAdmin(UserAdmin):
    inlines = [*UserAdmin.inlines, TokenBudgetInline]
