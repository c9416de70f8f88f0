"""Every socket (the layout's, a tree's, a generation's) closes when its session logs
out — that session's only: the same user's other browser stays live — and all of a
user's sockets close when the user is deactivated. The page is told why."""

import asyncio
import json
from importlib import import_module

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from completions.models import Generation
from config.routing import websocket_urlpatterns
from core.consumers import GONE_CLOSE

pytestmark = pytest.mark.django_db(transaction=True)


def socket(user, path, session_key=None):
    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    ws.scope["user"] = user
    if session_key:
        ws.scope["session"] = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return ws


def signed_in(user) -> tuple[Client, str]:
    browser = Client()
    browser.force_login(user)
    return browser, browser.cookies[settings.SESSION_COOKIE_NAME].value


async def in_thread(fn, *args):
    from django.db import connections

    def run():
        try:
            return fn(*args)
        finally:
            connections.close_all()

    return await asyncio.to_thread(run)


async def closed(ws) -> tuple[list, dict]:
    told = []
    while True:
        out = await ws.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            return told, out
        told.append(out.get("text", ""))


def test_it_closes_the_sockets_of_a_session_that_logs_out(make_user):
    ann = make_user()
    generation = Generation.objects.create(owner=ann, kind="workbench", params={}, state="queued")
    here, key = signed_in(ann)
    _elsewhere, other_key = signed_in(ann)

    async def scenario():
        ping = socket(ann, "/ws/ping/", key)
        run = socket(ann, f"/ws/generations/{generation.pk}/", key)
        other = socket(ann, "/ws/ping/", other_key)
        for ws in (ping, run, other):
            assert (await ws.connect())[0]
        await run.receive_from(timeout=5)
        response = await in_thread(here.post, "/logout/")
        ends = [await closed(ping), await closed(run)]
        stays = await other.receive_nothing(timeout=0.5)
        await other.disconnect()
        return response, ends, stays

    response, ends, stays = asyncio.run(scenario())
    assert response.status_code == 302
    assert [end[1] for end in ends] == [{"type": "websocket.close", "code": GONE_CLOSE}] * 2
    assert "You have signed out." in ends[1][0][-1]  # the run's badge says so
    assert stays


def test_it_closes_every_socket_of_a_deactivated_user(make_user):
    from loom.models import Tree

    ann, ben = make_user(), make_user()
    tree = Tree.objects.create_from_prompt(ann, "A tree")
    _browser, key = signed_in(ann)

    def deactivate():
        ann.is_active = False
        ann.save(update_fields=["is_active"])

    async def scenario():
        ping = socket(ann, "/ws/ping/", key)
        loom = socket(ann, f"/ws/loom/{tree.pk}/")
        bens = socket(ben, "/ws/ping/")
        for ws in (ping, loom, bens):
            assert (await ws.connect())[0]
        await in_thread(deactivate)
        ends = [await closed(ping), await closed(loom)]
        stays = await bens.receive_nothing(timeout=0.5)
        await bens.disconnect()
        return ends, stays

    ends, stays = asyncio.run(scenario())
    assert [end[1]["code"] for end in ends] == [GONE_CLOSE, GONE_CLOSE]
    told = [json.loads(t) for t in ends[1][0] if t.startswith("{")]
    assert {"kind": "closed", "message": "Your account is no longer active."} in told
    assert stays
