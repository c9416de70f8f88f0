"""A generation that ends while the reader is being rendered is on the page either
way: still live (its socket re-joins and brings the end) or attached as children.
Never neither: the CI run of the several-models browser test lost one that way, the
reader re-read by the first generation's end seeing the second as running when it
attached the finished ones and as finished when it listed the live ones."""

import pytest
from django.db import connection

from completions.models import Generation

pytestmark = pytest.mark.django_db


def ends_after_first_read(generation):
    """A query wrapper: right after the request's first read of generations, the worker
    marks `generation` done with its text, unclaimed (its own attach still to come)."""
    state = {"ended": False}

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not state["ended"] and sql.startswith("SELECT") and "completions_generation" in sql:
            state["ended"] = True
            Generation.objects.filter(pk=generation.pk).update(
                state="done", choices=[{"index": 0, "text": " the end", "finish_reason": "stop"}]
            )
        return result

    return state, wrapper


def test_it_shows_it_live_or_attached(client, make_tree):
    tree = make_tree(prompt="Root")
    running = Generation.objects.create(
        owner=tree.owner, kind="loom", params={"prompt": "Root", "n": 1}, state="running",
        target={"tree": tree.pk, "parent": tree.root.pk},
        choices=[{"index": 0, "text": " the"}],
    )  # fmt: skip
    client.force_login(tree.owner)
    state, wrapper = ends_after_first_read(running)
    with connection.execute_wrapper(wrapper):
        page = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/")
    assert page.status_code == 200 and state["ended"]
    live = f'ws-connect="/ws/generations/{running.pk}/"' in page.text
    attached = " the end" in page.text
    assert live or attached
    running.refresh_from_db()
    if attached:
        assert running.claimed_at is not None
