import asyncio

import pytest
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from completions.models import Generation
from completions.streaming import group_name
from config.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)


def connect(user, generation_id):
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/generations/{generation_id}/"
    )
    communicator.scope["user"] = user
    return communicator


def test_it_streams_escaped_tokens_and_the_final_fragment(make_user):
    user = make_user()
    generation = Generation.objects.create(
        owner=user,
        kind="workbench",
        params={},
        state="running",
        choices=[{"index": 0, "text": "<b>so far</b>"}],
    )
    gid = generation.pk

    async def scenario():
        ws = connect(user, gid)
        connected, _ = await ws.connect()
        assert connected
        hello = await ws.receive_from(timeout=5)
        layer = get_channel_layer()
        await layer.group_send(
            group_name(gid),
            {"type": "gen.tokens", "items": [[0, "<script>x</script>"], [1, " & y"]]},
        )
        tokens = await ws.receive_from(timeout=5)
        await Generation.objects.filter(pk=gid).aupdate(state="done")
        await layer.group_send(
            group_name(gid),
            {"type": "gen.state", "state": "done", "error_code": "", "request_id": ""},
        )
        final = await ws.receive_from(timeout=5)
        await ws.disconnect()
        return hello, tokens, final

    hello, tokens, final = asyncio.run(scenario())
    assert f'id="gen-{gid}-state"' in hello and "Running" in hello
    assert f'hx-swap-oob="innerHTML:#gen-{gid}-choice-0">&lt;b&gt;so far&lt;/b&gt;<' in hello
    assert tokens == (
        f'<span hx-swap-oob="beforeend:#gen-{gid}-choice-0">&lt;script&gt;x&lt;/script&gt;</span>'
        f'<span hx-swap-oob="beforeend:#gen-{gid}-choice-1"> &amp; y</span>'
    )
    assert "<script>" not in tokens
    assert (
        f'<span id="gen-{gid}-state" class="gen-state state-done" hx-swap-oob="true">Done</span>'
        in final
    )
    assert f'id="gen-{gid}-final"' in final
    from completions.registry import result_url

    assert (
        f'hx-get="{result_url(generation)}"' in final and f'hx-target="#gen-{gid}-result"' in final
    )


def test_it_refuses_someone_elses_generation(make_user):
    owner, other = make_user(), make_user()
    generation = Generation.objects.create(owner=owner, kind="loom", params={}, state="running")

    async def scenario():
        ws = connect(other, generation.pk)
        connected, _ = await ws.connect()
        await ws.disconnect()
        return connected

    assert asyncio.run(scenario()) is False


def test_it_uses_the_apps_registered_result_url(make_user):
    from completions import registry

    registry.register_result_url("loom", lambda g: f"/loom/generated/{g.pk}/")
    user = make_user()
    generation = Generation.objects.create(owner=user, kind="loom", params={}, state="done")

    async def scenario():
        ws = connect(user, generation.pk)
        await ws.connect()
        hello = await ws.receive_from(timeout=5)
        await ws.disconnect()
        return hello

    try:
        assert f'hx-get="/loom/generated/{generation.pk}/"' in asyncio.run(scenario())
    finally:
        registry._RESULT_URLS.pop("loom", None)
