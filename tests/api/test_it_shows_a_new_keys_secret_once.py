"""Creating a key on the API keys page shows its secret once — with ready env, curl
and openai-SDK snippets using it and this server's own /v1 — and never again."""

import re
from html import unescape

import pytest

from api.models import ApiKey

pytestmark = pytest.mark.django_db


def pre(html: str, element_id: str) -> str:
    return unescape(re.search(rf'<pre id="{element_id}" class="code">(.*?)</pre>', html, re.S)[1])


@pytest.mark.parametrize("htmx", [True, False])
def test_it_shows_the_secret_and_snippets_once(client, make_user, htmx):
    user = make_user()
    client.force_login(user)
    headers = {"HX-Request": "true"} if htmx else {}
    response = client.post("/keys/", {"name": "eval scripts"}, headers=headers)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]  # no cache may keep the secret
    html = response.content.decode()
    key = ApiKey.objects.get(user=user)
    secret = pre(html, "key-secret")
    assert secret.startswith(key.prefix + ".") and len(secret) > 40
    assert ApiKey.objects.authenticate(secret) == key
    assert pre(html, "key-env") == (
        f"export ACS_API_BASE=http://testserver/v1\nexport ACS_API_KEY={secret}"
    )
    curl = pre(html, "key-curl")
    assert curl.startswith('curl -s "$ACS_API_BASE/completions"')
    assert '-H "Authorization: Bearer $ACS_API_KEY"' in curl
    python = pre(html, "key-python")
    assert (
        'OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])' in python
    )
    assert "client.completions.create(" in python
    assert 'data-copy-target="key-secret"' in html and 'data-copy-target="key-env"' in html
    assert "eval scripts" in html and key.prefix in html
    # Full page or fragment: the fragment is the keys section only.
    assert ("<html" in html) is not htmx

    again = client.get("/keys/").content.decode()
    assert secret not in again and secret.split(".")[1] not in again
    assert key.prefix in again  # listed by its prefix only


def test_it_refuses_an_empty_name_and_makes_no_key(client, make_user):
    client.force_login(make_user())
    response = client.post("/keys/", {"name": "   "}, headers={"HX-Request": "true"})
    assert response.status_code == 200  # htmx swaps only 2xx: the form shows its error
    assert "This field is required" in response.content.decode()
    assert client.post("/keys/", {"name": ""}).status_code == 400
    assert not ApiKey.objects.exists()


def test_it_lists_usage_against_the_budget(client, make_user, make_key, settings):
    settings.WEFT_API_KEY_MONTHLY_BUDGET = 5000
    user = make_user()
    make_key(user, "default budget")
    make_key(user, "small", budget=1234)
    client.force_login(user)
    html = client.get("/keys/").content.decode()
    assert "0 of 5,000 tokens" in html and "0 of 1,234 tokens" in html
    assert html.count('<tr id="key-') == 2
