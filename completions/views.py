from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from completions import budget, lifecycle
from completions.models import Generation


def usage(request):
    month = budget.month_of()
    context = {
        "summary": budget.usage_summary(request.user, month),
        "days": budget.daily_breakdown(request.user, month),
        "month": month,
        "resets_at": budget.next_reset(),
    }
    return render(request, "completions/usage.html", context)


def _own_generation(request, generation_id: int) -> Generation:
    # Someone else's generation is a 404, not a 403: ids are not to be probed.
    return get_object_or_404(Generation, pk=generation_id, owner=request.user)


def generation_result(request, generation_id: int):
    """The saved result of a generation, the default target of the final fragment."""
    generation = lifecycle.check_alive(_own_generation(request, generation_id))
    return render(request, "completions/_result.html", {"generation": generation})


@require_POST
def generation_cancel(request, generation_id: int):
    generation = _own_generation(request, generation_id)
    if not generation.is_terminal:
        lifecycle.cancel(generation)
    if request.htmx:
        return render(request, "completions/_result.html", {"generation": generation})
    return HttpResponse(status=204)
