"""The Usage page's charts, in-process: tokens per day this month stacked by model
(page runs by their kept Generation, the rest "model not kept"; API requests by their
metadata rows), the tokens left against the budget and an even pace, each API key its
own chart against its own budget, and for staff every user's and every model's."""

import datetime as dt
import json
import re

import pytest
from django.utils import timezone

from api.models import ApiKey, ApiRequest
from completions import budget
from completions.models import BudgetMonth, DailyUsage, Generation
from usage import charts as usage_charts

pytestmark = pytest.mark.django_db


def _settled(user, model: str, tokens: int) -> None:
    Generation.objects.create(owner=user, kind="workbench", params={"model": model, "prompt": "x"},
                              state="done", charged_tokens=tokens, settled_at=timezone.now(),
                              budget_month=budget.month_of())  # fmt: skip


def _specs(page: str) -> dict[str, dict]:
    figures = re.findall(r'<figure class="weft-chart" id="([^"]+)".*?<script type="application/json">(.*?)</script>',
                         page, re.S)  # fmt: skip
    return {fid: json.loads(spec) for fid, spec in figures}


def test_it_stacks_page_tokens_by_model_against_the_budget(client, make_user, budget_of):
    user = make_user()
    budget_of(user, 10_000)
    month, today = budget.month_of(), timezone.now().astimezone(dt.UTC).date()
    DailyUsage.objects.create(
        user=user, day=today, prompt_tokens=400, completion_tokens=100, runs=3
    )
    BudgetMonth.objects.create(account=f"pages:{user.pk}", user=user, month=month, used=500)
    _settled(user, "scripted", 300)
    _settled(user, "other", 100)
    client.force_login(user)
    page = client.get("/usage/").content.decode()
    spec = _specs(page)["chart-usage-pages"]
    labels = [s["label"] for s in spec["series"]]
    assert labels == ["scripted", usage_charts.NOT_KEPT, "other", "tokens left", "an even pace"]
    i = today.day - 1
    bars = {s["label"]: s["values"][i] for s in spec["series"]}
    assert bars == {"scripted": 300, usage_charts.NOT_KEPT: 100, "other": 100,
                    "tokens left": 9_500, "an even pace": pytest.approx(10_000 * (1 - today.day / len(spec["x"])))}  # fmt: skip
    assert all(
        s["values"][j] is None for s in spec["series"][:4] for j in range(i + 1, len(spec["x"]))
    )
    assert spec["stacked"] and spec["marks"] == [{"x": today.day, "label": "today"}]
    assert spec["x_names"][0] == f"{month:%Y-%m}-01"
    # The text alternative has the same figures.
    assert f"<td>{today.isoformat()}</td><td>300</td><td>100</td><td>100</td><td>9,500</td>" in page
    assert "chart-usage-everyone" not in page  # staff only


def test_it_charts_each_key_against_its_own_budget(client, make_user):
    user = make_user()
    key, _ = ApiKey.objects.create_key(user, "scripts", budget=1_000)
    for i, (model, p, c) in enumerate([("m1", 50, 10), ("m2", 5, 5), ("m1", 20, 0)]):
        ApiRequest.objects.create(request_id=f"req-{i}", key=key, key_prefix=key.prefix, user=user,
                                  endpoint="/v1/completions", model=model, prompt_tokens=p,
                                  completion_tokens=c)  # fmt: skip
    client.force_login(user)
    spec = _specs(client.get("/usage/").content.decode())[f"chart-usage-key-{key.pk}"]
    i = timezone.now().astimezone(dt.UTC).day - 1
    assert {s["label"]: s["values"][i] for s in spec["series"][:3]} == {
        "m1": 80,
        "m2": 10,
        "tokens left": 910,
    }
    assert spec["title"] == "scripts: tokens per day"


def test_it_shows_staff_everyones_tokens_by_user_and_model(client, make_user):
    ann, bo = make_user(username="ann"), make_user(username="bo")
    today = timezone.now().astimezone(dt.UTC).date()
    DailyUsage.objects.create(user=ann, day=today, prompt_tokens=70, completion_tokens=0)
    DailyUsage.objects.create(user=bo, day=today, prompt_tokens=20, completion_tokens=10)
    key, _ = ApiKey.objects.create_key(bo, "k")
    ApiRequest.objects.create(request_id="req-x", key=key, key_prefix=key.prefix, user=bo,
                              endpoint="/v1/completions", model="m1", prompt_tokens=40)  # fmt: skip
    _settled(ann, "scripted", 70)
    client.force_login(make_user(is_staff=True))
    specs = _specs(client.get("/usage/").content.decode())
    i = today.day - 1
    users = specs["chart-usage-everyone-users"]["series"]
    assert {s["label"]: s["values"][i] for s in users} == {"ann": 70, "bo": 70}
    models = specs["chart-usage-everyone-models"]["series"]
    assert {s["label"]: s["values"][i] for s in models} == {"scripted": 70, "m1": 40}
