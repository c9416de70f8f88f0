"""50 threads, each with its own Postgres connection, start runs for one user at once.
The month row's lock must let exactly as many through as fit — never one more."""

import threading

import pytest
from django.db import connection

from completions import pipeline
from completions.budget import BudgetRefused, usage_summary
from completions.models import BudgetMonth, Generation

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_never_overshoots(scripted, make_user, budget_of, unconsumed_queue):
    user = make_user()
    budget_of(user, 1000)
    data = {"model": "scripted", "prompt": [1, 2, 3, 4, 5, 6, 7], "max_tokens": 30}  # 37 tokens
    from completions.client import list_models

    list_models()  # warm the cache so the threads race on the database, not on HTTP
    barrier = threading.Barrier(50)
    results: list[str] = []
    lock = threading.Lock()

    def worker():
        try:
            barrier.wait(timeout=30)
            try:
                pipeline.start(user, data, kind="workbench")
                outcome = "ok"
            except BudgetRefused:
                outcome = "refused"
            with lock:
                results.append(outcome)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 50
    fits = 1000 // 37
    assert results.count("ok") == fits
    assert results.count("refused") == 50 - fits
    month = BudgetMonth.objects.get(user=user)
    assert month.reserved == fits * 37 <= 1000
    assert Generation.objects.filter(owner=user).count() == fits
    assert usage_summary(user)["remaining"] == 1000 - fits * 37
