from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from api import usage_charts  # the charts of the usage page
from api.ledger import usage_by_key  # the API's per-key section of the usage page
from completions import budget, lifecycle
from completions.models import Generation
from completions.registry import may_watch, render_result
from core.shortcuts import own_generation
from feedback.models import BudgetRequest  # asked for more budget: the answers


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
    context.update(usage_charts.context(request.user, month, context))
    context["budget_requests"] = BudgetRequest.objects.for_user(request.user)[:20]
    return render(request, "completions/usage.html", context)


@require_GET
def generation_result(request, generation_id: int):
    """The saved result of a generation, what every page's final fragment loads: the
    generation's kind renders it (completions.registry)."""
    generation = Generation.objects.pages().filter(pk=generation_id).first()
    if generation is None or not may_watch(request.user, generation):
        raise Http404("no such generation")
    return render_result(request, lifecycle.check_alive(generation))


@require_POST
def generation_cancel(request, generation_id: int):
    """The one Cancel of every page (completions/_live.html#cancel). The worker
    closes the stream and keeps the text so far; the socket brings the final state."""
    generation = own_generation(request, generation_id)
    if not generation.is_terminal:
        lifecycle.cancel(generation)
    return HttpResponse(status=204)
