"""Where a page refuses a run for the budget — the Workbench, Inspect, Batch — the
refusal links to "Ask for more budget" with what it asked and had left, and that link
opens the form suggesting the difference; nothing was sent."""

import re
from html import unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from completions.models import TokenBudget
from tests import params_pages
from tests.params_pages import post_inspect, post_workbench, sent

pytestmark = pytest.mark.django_db
scripted_url, scripted = params_pages.scripted_url, params_pages.scripted  # fixtures


def _ask_link(page: str) -> str:
    found = re.search(r'<a class="ask-budget"\s+href="([^"]+)"', page)
    assert found, page[-2000:]
    return unescape(found.group(1))


def _suggested(client, link: str) -> int:
    page = client.get(link).content.decode()
    return int(re.search(r'name="amount" value="(\d+)"', page).group(1))


@pytest.mark.parametrize("where", ["workbench", "inspect", "batch"])
def test_it_links_a_refusal_to_a_budget_request(where, client, make_user, scripted, settings):
    settings.WEFT_GENERATION_QUEUE = "weft-nobody-listens"
    user = make_user()
    TokenBudget.objects.create(user=user, monthly_tokens=10)
    client.force_login(user)
    if where == "workbench":
        page = post_workbench(client, {"max_tokens": "50"})
    elif where == "inspect":
        page = post_inspect(client, {"text": "Once upon a time there was an owl"})
    else:
        upload = SimpleUploadedFile("p.txt", b"Once\nTwice\n")
        page = client.post("/batch/new/", {"model": "scripted", "n": "1", "max_tokens": "8",
                                           "format": "auto", "file": upload}).content.decode()  # fmt: skip
    assert "Refused" in page or "budget" in page
    link = _ask_link(page)
    asked, left = (int(re.search(rf"{k}=(\d+)", link).group(1)) for k in ("asked", "left"))
    assert left == 10 and asked > 10
    assert _suggested(client, link) == asked - left
    assert sent(scripted) == []
