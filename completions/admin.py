from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from completions.models import BudgetMonth, DailyUsage, Generation, TokenBudget


@admin.register(TokenBudget)
class TokenBudgetAdmin(admin.ModelAdmin):
    list_display = ["user", "monthly_tokens"]
    search_fields = ["user__username"]
    autocomplete_fields = ["user"]


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


# The override is edited where an admin looks for a user: on the user's own page.
User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class WeftUserAdmin(UserAdmin):
    inlines = [*UserAdmin.inlines, TokenBudgetInline]
