"""History: search over prompt and sample text, filters by model and date, pages."""

import datetime as dt

import pytest

from tests.workbench.helpers import make_generation
from workbench.models import Run


@pytest.mark.django_db
def test_it_searches_and_filters_history(client, make_user):
    user = make_user()
    river = Run.objects.save_generation(
        make_generation(user, texts=["the heron waited by the water"], prompt="A river"),
        title="river",
    )
    forest = Run.objects.save_generation(
        make_generation(user, texts=["an owl flew"], prompt="A forest"), title="forest"
    )
    Run.objects.filter(pk=forest.pk).update(model="other-model")
    Run.objects.filter(pk=river.pk).update(saved_at=dt.datetime(2025, 1, 5, tzinfo=dt.UTC))
    client.force_login(user)

    def titles(query: str) -> set[str]:
        page = client.get(f"/history/?{query}").content.decode()
        return {t for t in ("river", "forest") if f">{t}</a>" in page}

    assert titles("") == {"river", "forest"}
    assert titles("q=heron") == {"river"}  # a word of a sample
    assert titles("q=forest") == {"forest"}  # a word of a prompt/title
    assert titles("q=owl+flew") == {"forest"}
    assert titles("q=nothing-like-this") == set()
    assert titles("model=other-model") == {"forest"}
    assert titles("since=2025-06-01") == {"forest"}
    assert titles("until=2025-01-31") == {"river"}

    # The htmx search swaps only the results.
    fragment = client.get("/history/?q=heron", headers={"HX-Request": "true",
                                                       "HX-Target": "history-results"})  # fmt: skip
    body = fragment.content.decode()
    assert body.lstrip().startswith('<div id="history-results">') and "<html" not in body

    # 20 a page.
    for i in range(21):
        Run.objects.save_generation(make_generation(user, texts=[f"filler {i}"]), title=f"f{i}")
    first = client.get("/history/").content.decode()
    assert "page 1 of 2" in first and "Older" in first
    assert "page 2 of 2" in client.get("/history/?page=2").content.decode()
