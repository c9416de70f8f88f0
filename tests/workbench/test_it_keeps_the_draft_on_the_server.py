"""The Workbench draft: the autosave endpoint keeps the prompt and every setting as
typed (an invalid value too), a field the post leaves out keeps its stored value, a
value that cannot be stored refuses the whole save and changes nothing, and a draft is
its owner's only."""

import re

import pytest

from tests.workbench.helpers import make_generation
from workbench.models import Draft

TYPED = {
    "prompt": "The lighthouse keeper\n  wrote:", "model": "scripted", "max_tokens": "abc",
    "n": "3", "temperature": "0.7", "seed": "", "logprobs": "5", "stop_1": "\\n\\n",
    "echo": "on", "echo__present": "1", "add_special_tokens__present": "1",
}  # fmt: skip


def field(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert match, name
    return match.group(1)


@pytest.mark.django_db
def test_it_keeps_the_draft_as_typed(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    response = client.post("/workbench/draft/", TYPED)
    assert response.status_code == 200 and "Draft saved" in response.content.decode()

    page = client.get("/workbench/").content.decode()
    assert ">The lighthouse keeper\n  wrote:</textarea>" in page
    assert field(page, "max_tokens") == "abc"  # kept as typed: nothing typed is lost
    assert (field(page, "n"), field(page, "temperature"), field(page, "logprobs")) == (
        "3",
        "0.7",
        "5",
    )
    assert field(page, "stop_1") == "\\n\\n"
    assert re.search(r'id="id_echo" name="echo" checked', page)
    assert not re.search(r'id="id_add_special_tokens" name="add_special_tokens" checked', page)
    assert page.count('id="budget"') == 1

    # A post naming only the prompt leaves every other field as stored.
    client.post("/workbench/draft/", {"prompt": "Only the prompt changed"})
    page = client.get("/workbench/").content.decode()
    assert ">Only the prompt changed</textarea>" in page
    assert field(page, "max_tokens") == "abc" and field(page, "n") == "3"


@pytest.mark.django_db
def test_it_refuses_what_it_cannot_store_and_changes_nothing(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    client.post("/workbench/draft/", TYPED)
    before = Draft.objects.get(owner=user).values

    for bad in ({"prompt": "nul \x00 here", "n": "4"}, {"stop_1": "x" * 10_001, "n": "4"},
                {"n": "4", "show": "not a number"}):  # fmt: skip
        response = client.post("/workbench/draft/", bad)
        body = response.content.decode()
        assert response.status_code == 400, bad
        assert 'role="alert"' in body and "Draft not saved" in body
        assert Draft.objects.get(owner=user).values == before


@pytest.mark.django_db
def test_it_keeps_each_users_draft_their_own(client, make_user, engine):
    owner, other = make_user(), make_user()
    theirs = make_generation(owner, texts=["owner's sample"])
    client.force_login(owner)
    client.post("/workbench/draft/", {"prompt": "owner's words", "show": str(theirs.pk)})
    assert Draft.objects.get(owner=owner).runs == [theirs.pk]

    client.force_login(other)
    page = client.get("/workbench/").content.decode()
    assert "owner's words" not in page and "owner&#x27;s sample" not in page
    # Someone else's run cannot be put on one's page, nor taken off the owner's.
    assert (
        client.post("/workbench/draft/", {"prompt": "x", "show": str(theirs.pk)}).status_code == 404
    )
    assert client.post(f"/workbench/generations/{theirs.pk}/dismiss/").status_code == 404
    assert not Draft.objects.filter(owner=other).exists()
    assert Draft.objects.get(owner=owner).values == {"prompt": "owner's words"}

    client.force_login(owner)
    page = client.get("/workbench/").content.decode()
    assert "owner&#x27;s sample" in page and f'id="run-{theirs.pk}"' in page
    assert client.post(f"/workbench/generations/{theirs.pk}/dismiss/").status_code == 204
    assert Draft.objects.get(owner=owner).runs == []
    assert f'id="run-{theirs.pk}"' not in client.get("/workbench/").content.decode()
