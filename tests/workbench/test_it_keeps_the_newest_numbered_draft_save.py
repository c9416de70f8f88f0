"""Draft saves are numbered by the page that sends them (`draft_page`, a random id per
page load, and `draft_seq`, 1, 2, … there): a debounced save still in flight when the
leaving page's beacon carries newer text can be handled last, and must not overwrite
the newer text. The server keeps the newest save of a page; another page's save (a
reload, another browser) is newer than what the last page sent."""

import pytest

from workbench.models import Draft

pytestmark = pytest.mark.django_db


def save(client, prompt: str, page: str | None = "page-a", seq: int | None = None, **extra):
    data = {"prompt": prompt, **extra}
    if page is not None:
        data["draft_page"] = page
    if seq is not None:
        data["draft_seq"] = str(seq)
    response = client.post("/workbench/draft/", data)
    assert response.status_code == 200 and "Draft saved" in response.content.decode()


def stored(user) -> str:
    return Draft.objects.get(owner=user).values["prompt"]


def test_it_ignores_an_older_save_handled_after_a_newer_one(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    save(client, "The", seq=1)
    # The beacon (save 3, the newest text) lands before the debounced save 2.
    save(client, "The lighthouse keeper wrote", seq=3)
    save(client, "The lighthouse", seq=2, n="4")
    assert stored(user) == "The lighthouse keeper wrote"
    assert "n" not in Draft.objects.get(owner=user).values  # nothing of save 2 was kept
    save(client, "The lighthouse keeper wrote", seq=3)  # the same save twice: once
    save(client, "The lighthouse keeper wrote again", seq=4)
    assert stored(user) == "The lighthouse keeper wrote again"


def test_it_takes_another_pages_saves_from_their_first(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    save(client, "typed on the first page", seq=57)
    save(client, "after a reload", page="page-b", seq=1)
    assert stored(user) == "after a reload"
    save(client, "the first page's last save, late", seq=56)
    assert stored(user) == "after a reload"  # older than what page a had already sent


def test_it_still_takes_unnumbered_saves(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    save(client, "numbered", seq=5)
    save(client, "unnumbered", page=None)
    assert stored(user) == "unnumbered"


def test_it_refuses_a_malformed_number_and_changes_nothing(client, make_user, engine):
    user = make_user()
    client.force_login(user)
    save(client, "kept", seq=2)
    for seq in ("0", "-1", "abc", str(2**63)):
        response = client.post(
            "/workbench/draft/", {"prompt": "lost?", "draft_page": "page-a", "draft_seq": seq}
        )
        assert response.status_code == 400, seq
    assert stored(user) == "kept"


def test_it_remembers_the_last_pages_only(client, make_user, engine):
    from workbench.models import DRAFT_PAGES

    user = make_user()
    client.force_login(user)
    for i in range(DRAFT_PAGES + 3):
        save(client, f"page {i}", page=f"page-{i}", seq=5)
    numbers = Draft.objects.get(owner=user).save_numbers
    assert numbers == [[f"page-{i}", 5] for i in range(3, DRAFT_PAGES + 3)]
