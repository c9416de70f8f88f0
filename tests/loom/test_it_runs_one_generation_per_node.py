"""Pressing g twice starts one generation, not two: while a node's generation is
queued or running a second one for the same node is refused with a message
(server-side, under the node's row lock, so parallel presses agree too)."""

import threading

import pytest
from django.db import connection
from django.test import Client

from completions.models import Generation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quiet_queue(backend, settings):
    # Nothing consumes this queue: a started generation stays queued.
    settings.WEFT_GENERATION_QUEUE = "weft-test-nobody-listens"


def test_it_refuses_a_second_generation_for_a_busy_node(quiet_queue, client, make_tree):
    tree = make_tree(prompt="Root")
    client.force_login(tree.owner)
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/generate/"
    first = client.post(url, {"n": "2", "max_tokens": "4"}, HTTP_HX_REQUEST="true")
    assert first.status_code == 200
    second = client.post(url, {"n": "2", "max_tokens": "4"}, HTTP_HX_REQUEST="true")
    assert second.status_code == 422 and "already generating" in second.text
    assert Generation.objects.filter(kind="loom").count() == 1
    # Another node of the tree is free, and so is this one once the run has ended.
    child = tree.root.add_child(" more")
    other = client.post(f"/loom/{tree.pk}/n/{child.pk}/generate/", {"n": "1", "max_tokens": "4"})
    assert other.status_code == 200
    Generation.objects.filter(target__parent=tree.root.pk).update(state="done")
    assert client.post(url, {"n": "1", "max_tokens": "4"}).status_code == 200


def test_it_starts_one_of_two_parallel_presses(quiet_queue, make_tree):
    tree = make_tree(prompt="Root")
    url = f"/loom/{tree.pk}/n/{tree.root.pk}/generate/"
    barrier = threading.Barrier(2)
    statuses = []

    def press():
        try:
            c = Client()
            c.force_login(tree.owner)
            barrier.wait()
            statuses.append(c.post(url, {"n": "1", "max_tokens": "4"}).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=press) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 422]
    assert Generation.objects.filter(kind="loom").count() == 1
