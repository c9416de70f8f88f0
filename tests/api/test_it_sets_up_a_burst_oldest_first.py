"""The setup turns (api.turns): when more requests want a setup step than there are
turns, a freed turn goes to the request that arrived first — even one asking for its
second step after younger ones queued for their first — and a waiter cancelled (its
client gone) neither keeps a turn nor loses one for the others."""

import asyncio

from api.turns import OldestFirst


async def run_burst() -> tuple[list[str], OldestFirst]:
    gate = OldestFirst(1)
    order: list[str] = []

    async def step(name: str, arrived: float) -> None:
        async with gate.turn(arrived):
            order.append(name)
            await asyncio.sleep(0.01)

    async def two_steps() -> None:  # arrived first; asks again while younger ones wait
        await step("oldest 1st step", 1.0)
        await step("oldest 2nd step", 1.0)

    first = asyncio.create_task(two_steps())
    await asyncio.sleep(0)  # it holds the only turn
    later = [asyncio.create_task(step(f"arrived {t}", t)) for t in (4.0, 2.0, 3.0)]
    doomed = asyncio.create_task(step("cancelled", 1.5))
    await asyncio.sleep(0)
    doomed.cancel()
    await asyncio.gather(first, *later)
    assert doomed.cancelled()
    return order, gate


def test_it_gives_a_freed_turn_to_the_oldest_request():
    order, gate = asyncio.run(run_burst())
    # The freed first turn goes to the oldest waiter then (2.0); the next to the oldest
    # request's second step, ahead of 3.0 and 4.0 who were waiting before it asked.
    assert order == ["oldest 1st step", "arrived 2.0", "oldest 2nd step", "arrived 3.0",
                     "arrived 4.0"]  # fmt: skip
    assert (gate.free, [w for w in gate.waiting if not w[2].done()]) == (1, [])
