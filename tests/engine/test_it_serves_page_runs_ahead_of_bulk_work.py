"""A request marked interactive (X-Weft-Priority: interactive, Weft's page runs) is
admitted ahead of waiting bulk samples, and while it has rows to step, the steps carry
only its rows: the bulk sequences keep their places and pause, then go on — nothing
is lost, and they are not starved once it ends (the scheduler driven step by step on
the scripted model)."""

from __future__ import annotations

import asyncio

from engine.generate import prepare
from engine.models import ScriptedModel
from engine.protocol import parse_completion
from engine.scheduler import BULK, INTERACTIVE, Job, Scheduler


def job(model: ScriptedModel, loop, max_tokens: int, priority: int) -> Job:
    body = {"prompt": "The cat", "max_tokens": max_tokens, "temperature": 0}
    req = parse_completion(body, default_model=model.model_id,
                           known_models={model.model_id}, max_logprobs=20)  # fmt: skip
    return Job(prepare(model, req), loop=loop, queue=asyncio.Queue(), priority=priority)


def tokens(j: Job) -> int:
    return sum(s.text.count for s in j.samples)


def step(sched: Scheduler) -> None:
    sched._admit()
    sched._step()


def test_it_pauses_bulk_rows_while_a_page_run_steps() -> None:
    loop = asyncio.new_event_loop()
    model = ScriptedModel()
    sched = Scheduler(model, max_sequences=4)
    bulk = job(model, loop, 50, BULK)
    sched._accept(bulk)
    for _ in range(5):
        step(sched)
    before = tokens(bulk)
    assert before > 0

    page = job(model, loop, 10, INTERACTIVE)
    sched._accept(page)
    while not page.done:
        step(sched)
    assert tokens(page) == 10
    assert tokens(bulk) == before  # paused, its sequence kept
    assert all(s.seq is not None for s in bulk.samples)

    while not bulk.done:
        step(sched)
    assert tokens(bulk) == 50
    loop.close()


def test_it_admits_a_page_run_ahead_of_waiting_bulk_samples() -> None:
    loop = asyncio.new_event_loop()
    model = ScriptedModel()
    sched = Scheduler(model, max_sequences=1)
    first, second = job(model, loop, 5, BULK), job(model, loop, 5, BULK)
    sched._accept(first)
    sched._accept(second)
    step(sched)
    page = job(model, loop, 5, INTERACTIVE)
    sched._accept(page)
    while not first.done:
        step(sched)
    step(sched)  # the freed sequence goes to the page run, not to the older bulk one
    assert tokens(page) > 0 and tokens(second) == 0
    loop.close()
