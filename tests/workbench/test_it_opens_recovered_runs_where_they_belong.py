"""Recover opens a Workbench run in the Workbench with one budget line, and an Inspect
scoring in Inspect (a scoring opened by its Workbench link is sent there too)."""

import pytest

from tests.workbench.helpers import make_generation


@pytest.mark.django_db
def test_it_opens_recovered_runs_where_they_belong(client, make_user, engine):
    user = make_user()
    run = make_generation(user, texts=["a kept sample"], prompt="from recover")
    scoring = make_generation(
        user, texts=[], kind="inspect",
        target={"mode": "score", "tab": "score", "rows": [
            {"position": 0, "id": 1, "text": "x", "logprob": None, "top": []}]},
    )  # fmt: skip
    client.force_login(user)

    page = client.get("/history/recover/").content.decode()
    assert f'href="/workbench/?generation={run.pk}">Open</a>' in page
    assert f'href="/inspect/{scoring.pk}/">Open in Inspect</a>' in page

    page = client.get(f"/workbench/?generation={run.pk}").content.decode()
    assert "a kept sample" in page
    assert page.count('id="budget"') == 1 and page.count("tokens left this month") == 1

    response = client.get(f"/workbench/?generation={scoring.pk}")
    assert response.status_code == 302 and response["Location"] == f"/inspect/{scoring.pk}/"
