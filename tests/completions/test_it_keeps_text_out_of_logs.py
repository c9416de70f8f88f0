import logging

import pytest

from completions import pipeline

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "Zanzibar-secret-prompt"


def test_it_logs_ids_and_codes_but_never_text(scripted, make_user, unconsumed_queue, caplog):
    user = make_user()
    caplog.set_level(logging.DEBUG)
    scripted.faults({"status": 503, "retry_after": 0}, {}, {"cut_after": 2})
    ok = pipeline.start(
        user, {"model": "scripted", "prompt": PROMPT, "max_tokens": 8}, kind="workbench"
    )
    pipeline.execute(ok.pk)
    cut = pipeline.start(
        user, {"model": "scripted", "prompt": PROMPT, "max_tokens": 8}, kind="workbench"
    )
    pipeline.execute(cut.pk)
    ok.refresh_from_db()
    cut.refresh_from_db()
    assert (ok.state, cut.state) == ("done", "failed")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"generation {ok.pk} done" in logged and "upstream_unavailable" in logged
    for text in [PROMPT, ok.choices[0]["text"].strip(), cut.choices[0]["text"].strip()]:
        assert text and text not in logged


def test_it_logs_no_text_from_the_public_api(scripted, make_user, caplog):
    """The /v1 proxy, in this process (ASGI, no server): served, cut and refused requests."""
    import asyncio

    import httpx
    from asgiref.sync import sync_to_async
    from django.db import connections

    from api.asgi import V1Router
    from api.models import ApiKey
    from api.proxy import close_connections
    from completions.passthrough import forget_targets

    # Only /v1 is asked for. (Importing config.asgi would set Django up again, and its
    # logging configuration would drop caplog's handler.)
    application = V1Router(django_app=None)

    _, secret = ApiKey.objects.create_key(make_user(), "logs")
    forget_targets()
    caplog.set_level(logging.DEBUG)
    scripted.faults({}, {"status": 503, "retry_after": 0}, {"cut_after": 2})
    body = {"model": "scripted", "prompt": PROMPT, "max_tokens": 8}

    async def run():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://weft") as client:
            auth = {"Authorization": f"Bearer {secret}"}
            ok = await client.post("/v1/completions", json=body, headers=auth)
            down = await client.post("/v1/completions", json=body, headers=auth)
            cut = await client.post("/v1/completions", json={**body, "stream": True}, headers=auth)
            bad = await client.post("/v1/completions", json={**body, "n": 0}, headers=auth)
            await asyncio.sleep(0.3)  # settlement runs after the answer
        await close_connections()
        # Key lookups ran the ORM in asgiref's thread: close that thread's connection.
        await sync_to_async(connections.close_all)()
        return ok, down, cut, bad

    ok, down, cut, bad = asyncio.run(run())
    assert (ok.status_code, down.status_code, cut.status_code, bad.status_code) == (
        200, 503, 200, 400)  # fmt: skip
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert ok.headers["x-request-id"] in logged and "upstream_unavailable" in logged
    assert "code=upstream_error" in logged and "code=invalid_request" in logged
    texts = [PROMPT, ok.json()["choices"][0]["text"].strip()]
    texts += [line for line in cut.text.splitlines() if '"text"' in line]
    for text in texts:
        assert text and text not in logged
