"""Two runs of the same prompt side by side: their settings (differences marked) and
each pair of samples marked where it first diverges; an identical pair says so."""

import re

import pytest

from tests.workbench.helpers import make_generation


@pytest.mark.django_db
def test_it_compares_two_runs(client, make_user):
    user = make_user()
    a = make_generation(user, texts=["The cat sat on the mat.", "same text"], prompt="P")
    b = make_generation(user, texts=["The cat sat in the hat.", "same text", "only B"], prompt="P")
    b.params = {**b.params, "temperature": 1.5}
    b.save()
    other_prompt = make_generation(user, texts=["x"], prompt="Q")
    client.force_login(user)

    page = client.get(f"/workbench/compare/?a={a.pk}&b={b.pk}").content.decode()
    pairs = re.findall(
        r'class="compare-pair" data-index="(\d+)"\s*(?:data-diverge-at="(\d+)")?', page
    )
    assert pairs == [("0", "12"), ("1", ""), ("2", "")]
    assert "first differs at character 12" in page and "identical in both runs" in page
    assert "only in one run" in page
    # Both sides are marked at the divergence, the shared part before it.
    assert page.count('<span class="diverge-mark"') == 2
    assert 'The cat sat <span class="diverge-mark"' in page
    assert re.search(r'<tr class="differs">\s*<th scope="row">temperature</th>', page)
    assert re.search(r'<tr class="differs">\s*<th scope="row">n</th>', page)

    # With only A: the other runs of the same prompt to pick from.
    page = client.get(f"/workbench/compare/?a={a.pk}").content.decode()
    assert f"a={a.pk}&amp;b={b.pk}" in page and f"b={other_prompt.pk}" not in page

    # Someone else's run, or nonsense, is a 404.
    intruder = make_user()
    client.force_login(intruder)
    assert client.get(f"/workbench/compare/?a={a.pk}&b={b.pk}").status_code == 404
    assert client.get("/workbench/compare/?a=abc").status_code == 404
