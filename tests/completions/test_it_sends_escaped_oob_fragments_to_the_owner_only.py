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


def test_it_renders_the_result_through_the_kinds_hook(make_user, client):
    """Every final fragment loads the door's result view, which hands the generation
    to the renderer its kind registered (and the default one for a kind without)."""
    from django.http import HttpResponse

    from completions import registry

    registry.register_result("testkind", lambda request, g: HttpResponse(f"hook {g.pk}"))
    user = make_user()
    generation = Generation.objects.create(owner=user, kind="testkind", params={}, state="done")
    plain = Generation.objects.create(owner=user, kind="otherkind", params={}, state="done")

    async def scenario():
        ws = connect(user, generation.pk)
        await ws.connect()
        hello = await ws.receive_from(timeout=5)
        await ws.disconnect()
        return hello

    try:
        assert f'hx-get="/generations/{generation.pk}/result/"' in asyncio.run(scenario())
        client.force_login(user)
        assert (
            client.get(f"/generations/{generation.pk}/result/").content
            == f"hook {generation.pk}".encode()
        )
        default = client.get(f"/generations/{plain.pk}/result/").content.decode()
        assert f'id="gen-{plain.pk}-result"' in default
        client.force_login(make_user())
        assert client.get(f"/generations/{generation.pk}/result/").status_code == 404
    finally:
        registry.unregister_result("testkind")
