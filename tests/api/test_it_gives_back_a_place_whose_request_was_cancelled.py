"""A request cancelled (its client gone) while its place among the key's active requests
is being taken in Redis leaves no place taken: once taken, the place is given back at
once, not held until its lease runs out (WEFT_API_LEASE_SECONDS, 30 s by default)."""

import asyncio

import redis.asyncio as aioredis
from django.conf import settings

from api import limits


async def cancel_while_out(key_id: int) -> list[bytes]:
    pauser = aioredis.Redis.from_url(settings.REDIS_URL)
    watcher = aioredis.Redis.from_url(settings.REDIS_URL)
    await watcher.ping()  # connected before the pause

    async def take_a_place() -> None:
        async with limits.slot_for(key_id, "req-gone", user_id=key_id):
            await asyncio.sleep(30)

    try:
        # Redis holds every client's commands for 0.4 s: the place is asked for meanwhile.
        await pauser.execute_command("CLIENT", "PAUSE", 400, "ALL")
        caller = asyncio.ensure_future(take_a_place())
        await asyncio.sleep(0.1)
        assert not caller.done()
        caller.cancel()
        await asyncio.sleep(1.0)  # the pause is over: the script ran, and what follows
        return await watcher.zrange(limits.active_key(key_id), 0, -1)
    finally:
        await watcher.delete(*limits._keys(key_id), *limits.user_keys(key_id))
        await limits.close_client()
        await pauser.aclose()
        await watcher.aclose()


def test_it_leaves_no_place_taken():
    assert asyncio.run(cancel_while_out(987_654)) == []
