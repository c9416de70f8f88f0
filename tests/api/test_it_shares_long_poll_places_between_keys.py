"""One key cannot hold every long-poll place: past WEFT_JOB_MAX_LONGPOLLS_PER_KEY its
next long-poll is declined while another key still gets one, until all of
WEFT_JOB_MAX_LONGPOLLS are taken; a place given back is free again (real Redis)."""

import asyncio

import pytest

from api import harvest, limits


async def places(settings) -> list[bool]:
    settings.WEFT_JOB_MAX_LONGPOLLS = 4
    settings.WEFT_JOB_MAX_LONGPOLLS_PER_KEY = 2
    client = limits.redis_client()
    await client.delete(
        harvest.WAITING_KEY,
        harvest._key_waiting(1),
        harvest._key_waiting(2),
        harvest._key_waiting(3),
        *(harvest._user_waiting(u) for u in (1, 2, 3)),
    )
    try:
        taken = [
            await harvest._enter("a1", 1, 5, 1),
            await harvest._enter("a2", 1, 5, 1),
            await harvest._enter("a3", 1, 5, 1),  # key 1's share is full
            await harvest._enter("b1", 2, 5, 2),  # key 2 still has room
            await harvest._enter("b2", 2, 5, 2),  # every place is taken now
            await harvest._enter("c1", 3, 5, 3),  # so a third key waits too
        ]
        await harvest._leave("a1", 1, 1)
        taken.append(await harvest._enter("a4", 1, 5, 1))  # a place given back
        assert await client.zcard(harvest.WAITING_KEY) == 4
        return taken
    finally:
        await client.delete(
            harvest.WAITING_KEY,
            harvest._key_waiting(1),
            harvest._key_waiting(2),
            harvest._key_waiting(3),
            *(harvest._user_waiting(u) for u in (1, 2, 3)),
        )
        await limits.close_client()


@pytest.mark.django_db
def test_it_keeps_one_key_to_its_share(settings):
    assert asyncio.run(places(settings)) == [True, True, False, True, True, False, True]
