from django.http import HttpResponse
from django.views.decorators.http import require_GET, require_POST

from completions import lifecycle
from completions.registry import render_result
from completions.shortcuts import own_generation, visible_generation


@require_GET
def generation_result(request, generation_id: int):
    """The saved result of a generation, what every page's final fragment loads: the
    generation's kind renders it (completions.registry). Its asker sees it, and whoever
    its kind lets see it (the other members of a shared Loom tree)."""
    generation = lifecycle.check_alive(visible_generation(request, generation_id))
    return render_result(request, generation)


@require_POST
def generation_cancel(request, generation_id: int):
    """The one Cancel of every page (completions/_live.html#cancel). The worker
    closes the stream and keeps the text so far; the socket brings the final state."""
    generation = own_generation(request, generation_id)
    if not generation.is_terminal:
        lifecycle.cancel(generation)
    return HttpResponse(status=204)
