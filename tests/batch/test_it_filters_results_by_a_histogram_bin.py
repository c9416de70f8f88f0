"""The results table filtered by a histogram bar, in-process: prompts with a sample in
the bin are listed (lo <= value < hi, as the bins are counted); a filter that cannot
be read is said so and filters nothing; the histograms count every sample."""

import re

import pytest

from batch import charts
from batch.models import Batch, BatchItem

pytestmark = pytest.mark.django_db


def _batch(user) -> Batch:
    batch = Batch.objects.create(owner=user, title="b", params={"model": "scripted", "max_tokens": 9},
                                 total=4, state="done")  # fmt: skip
    samples = [
        [{"tokens": 2, "mean_logprob": -0.5}, {"tokens": 9, "mean_logprob": -3.0}],
        [{"tokens": 3, "mean_logprob": -1.0}],
        [{"tokens": 9, "mean_logprob": -2.0}, {"tokens": None, "mean_logprob": None}],
        [],
    ]
    for i, s in enumerate(samples):
        BatchItem.objects.create(batch=batch, index=i, line=i + 1, prompt=f"p{i}", state="done",
                                 samples=[{"text": "x", "finish_reason": "length", **x} for x in s])  # fmt: skip
    return batch


def _rows(client, batch, query: str) -> list[int]:
    page = client.get(f"/batch/{batch.pk}/results/?{query}").content.decode()
    return [int(n) for n in re.findall(r'<td class="nowrap">(\d+)</td>', page)]


def test_it_lists_the_prompts_with_a_sample_in_the_bin(client, make_user):
    user = make_user()
    batch = _batch(user)
    client.force_login(user)
    assert _rows(client, batch, "") == [0, 1, 2, 3]
    assert _rows(client, batch, "length=9:10") == [0, 2]
    assert _rows(client, batch, "length=2:4") == [0, 1]
    assert _rows(client, batch, "mean_logprob=-1.0:-0.5") == [1]  # hi is outside the bin
    assert _rows(client, batch, "mean_logprob=-3.0:-1.5") == [0, 2]
    page = client.get(f"/batch/{batch.pk}/results/?length=9:10").content.decode()
    assert "Only prompts with a sample of completion length 9" in page
    assert f'hx-get="/batch/{batch.pk}/results/?page=1&amp;length=9:10"' in page

    lengths, means = charts.histograms(batch)
    assert sum(lengths.series[0].values) == 4 and sum(means.series[0].values) == 4  # one has none
    # Each bar's filter lists exactly the prompts counted in it.
    for chart in (lengths, means):
        for value, count in zip(chart.filter["values"], chart.series[0].values, strict=True):
            shown = _rows(client, batch, f"{chart.filter['param']}={value}")
            assert bool(shown) == bool(count), (value, count, shown)


@pytest.mark.parametrize("query", ["length=abc", "length=5", "length=9:2", "mean_logprob=nan:1",
                                   "length=1:inf", "length=%00:1", "mean_logprob=-1e400:0"])  # fmt: skip
def test_it_says_when_a_filter_cannot_be_read(client, make_user, query):
    user = make_user()
    batch = _batch(user)
    client.force_login(user)
    response = client.get(f"/batch/{batch.pk}/results/?{query}")
    assert response.status_code == 200
    assert "could not be read" in response.content.decode()
    assert _rows(client, batch, query) == [0, 1, 2, 3]


def test_it_draws_the_rates_of_a_finished_batch(make_user):
    from datetime import timedelta

    user = make_user()
    batch = _batch(user)
    items = list(batch.items.order_by("index"))
    for k, item in enumerate(items):
        item.finished_at = batch.created_at + timedelta(seconds=k * 0.4)
        item.completion_tokens = 10
        item.save()
    chart = charts.rate_chart(batch)
    assert chart.x == [0, 1]  # one-second buckets over a 1.2 s run
    prompts, tokens = (s.values for s in chart.series)
    assert prompts[0] == 3  # three prompts finished in the first second
    assert tokens[0] == 30
    assert prompts[1] == 1  # the last bucket: one prompt, over at least a second
