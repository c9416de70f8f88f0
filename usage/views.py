from django.shortcuts import render

from completions import budget
from feedback.models import BudgetRequest  # asked for more budget: the answers
from usage import charts
from usage.readers import usage_by_key


def usage(request):
    month = budget.month_of()
    context = {
        "summary": budget.usage_summary(request.user, month),
        "days": budget.daily_breakdown(request.user, month),
        "month": month,
        "resets_at": budget.next_reset(),
        "api_keys": usage_by_key(request.user),
        "api_allowance": budget.api_summary(request.user, month),
    }
    context.update(charts.context(request.user, month, context))
    context["budget_requests"] = BudgetRequest.objects.for_user(request.user)[:20]
    return render(request, "usage/usage.html", context)
