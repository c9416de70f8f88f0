"""Another user can neither open nor export someone's inspect result."""

import csv
import io

import pytest

from completions.models import Generation

pytestmark = pytest.mark.django_db


def test_it_keeps_results_to_their_owner(scripted, client, make_user):
    ada, bob = make_user("ada"), make_user("bob")
    client.force_login(ada)
    data = {"source": "text", "model": "scripted", "k": "3", "add_special_tokens": "on",
            "text": "the cat sat on the mat"}  # fmt: skip
    response = client.post("/inspect/score/", data)
    assert response.status_code == 302
    generation = Generation.objects.get(owner=ada, kind="inspect")
    url = f"/inspect/{generation.pk}/"
    assert response["Location"] == url

    assert client.get(url).status_code == 200
    own = client.get(f"{url}export.csv")
    assert own.status_code == 200
    assert len(list(csv.DictReader(io.StringIO(own.text)))) > 3

    client.force_login(bob)
    for path in (url, f"{url}export.csv", f"{url}export.jsonl"):
        assert client.get(path).status_code == 404
    assert client.post(f"{url}save/").status_code == 404
