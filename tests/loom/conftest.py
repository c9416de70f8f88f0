"""Loom fixtures: make_tree, and a stack (ASGI server + Celery worker) pointed
at the scripted engine so generations run for real."""

import time

import pytest

from tests.support import Supervisor, child_env, free_port, start_web, start_worker

FIXTURES = __import__("pathlib").Path(__file__).resolve().parent / "fixtures"
PYLOOM_DEMO = __import__("pathlib").Path("/work/shared/fixtures/pyloom_demo.json")


@pytest.fixture
def make_tree(make_user):
    from loom.models import Tree

    def make(owner=None, prompt: str = "Once upon a time", **fields):
        return Tree.objects.create_from_prompt(owner or make_user(), prompt, **fields)

    return make


@pytest.fixture(scope="session")
def engine_url():
    from engine.testing import run_engine

    # A small delay per token so streaming is observable (the page's socket opens once its
    # module scripts have run: at 10 ms a short run could end before it), short enough to
    # keep tests quick.
    with run_engine("scripted", token_delay=0.03) as base:
        yield base


@pytest.fixture(scope="session")
def loom_stack(django_db_setup, engine_url, tmp_path_factory):
    from django.conf import settings

    env = child_env(
        settings.DATABASES["default"]["NAME"],
        WEFT_BACKEND_URL=f"{engine_url}/v1",
        WEFT_GENERATION_QUEUE="loom",
    )
    sup = Supervisor()
    logs = tmp_path_factory.mktemp("loomstack")
    try:
        url = start_web(sup, env, free_port())
        start_worker(sup, env, logs / "worker.log")
        yield {"url": url, "env": env, "logs": logs, "engine": engine_url}
    finally:
        sup.stop_all()


@pytest.fixture
def backend(settings, engine_url):
    """Point this test process's door at the engine (views called through the test client)."""
    settings.WEFT_BACKEND_URL = f"{engine_url}/v1"
    settings.WEFT_GENERATION_QUEUE = "loom"  # the loom_stack worker's queue
    return engine_url


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} not met within {timeout} s")


def tree_shape(tree):
    """[(depth, text, author, bookmarked, archived, tags)] in preorder: the
    structure and content of a tree, independent of ids."""
    from loom.models import Node

    return [
        (d, r["text"], r["author"], r["bookmarked"], r["archived"], r["tags"])
        for d, r in Node.objects.preorder(tree)
    ]


def build_chain(tree, depth: int, parent=None, text="{i}"):
    """`depth` nodes, each the only child of the one before, under `parent`
    (default the root). Ids are taken from the sequence first so one
    bulk_create per 2,000 rows can name the parents."""
    from django.db import connection

    from loom.models import Node

    with connection.cursor() as cur:
        cur.execute(
            "SELECT nextval(pg_get_serial_sequence('loom_node', 'id')) FROM generate_series(1, %s)",
            [depth],
        )
        ids = [row[0] for row in cur.fetchall()]
    prev = (parent or tree.root).pk
    nodes = []
    for i, node_id in enumerate(ids):
        nodes.append(Node(id=node_id, tree=tree, parent_id=prev, position=0, text=text.format(i=i)))
        prev = node_id
    Node.objects.bulk_create(nodes, batch_size=2000)
    return nodes


@pytest.fixture(autouse=True)
def fast_passwords(request, settings):
    """PBKDF2 costs about a second per user on this machine; tests that do not
    log in through the real server do not need it."""
    if "loom_stack" not in request.fixturenames:
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def shown_node(response) -> int:
    """The node a reader fragment shows (its #loom-reader's data-node)."""
    import re

    match = re.search(r'id="loom-reader"[^>]*?data-node="(\d+)"', response.content.decode(), re.S)
    assert match, "no reader in the response"
    return int(match[1])
