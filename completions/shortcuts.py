"""The one lookup of a generation by id for every view that opens one: the user's own,
or one its kind lets them see; anyone else's is a 404."""

from __future__ import annotations

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404

from completions.models import Generation
from completions.registry import may_watch


def own_generation(request: HttpRequest, generation_id: int, *kinds: str) -> Generation:
    """The user's own generation (of one of `kinds`, when given). Anyone else's is a
    404, not a 403: ids are not to be probed."""
    generations = Generation.objects.filter(owner_id=request.user.pk).pages()
    if kinds:
        generations = generations.filter(kind__in=kinds)
    return get_object_or_404(generations, pk=generation_id)


def visible_generation(request: HttpRequest, generation_id: int) -> Generation:
    """The user's own generation, or one its kind lets them see (a Loom generation
    into a tree shared with them: completions.registry.register_watchers); else 404."""
    generation = Generation.objects.pages().filter(pk=generation_id).first()
    if generation is None or not may_watch(request.user, generation):
        raise Http404("no such generation")
    return generation
