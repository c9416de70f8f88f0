"""The Feedback form, in-process: it opens filled in with the page, the time and the
latest request id (a page run's or an API call's, whichever came last), all editable;
a message is stored with exactly what the fields held (no prompt or completion text
of its own accord); the author sees it and its state, and staff's reply."""

import re
from datetime import timedelta
from html import unescape

import pytest
from django.core import mail
from django.utils import timezone

from api.models import ApiKey, ApiRequest
from completions.models import Generation
from feedback.models import Feedback

pytestmark = pytest.mark.django_db
SECRET_PROMPT = "the secret prompt text"


def _value(page: str, name: str) -> str:
    tag = re.search(rf'<input[^>]*name="{name}"[^>]*>', page)
    assert tag, name
    value = re.search(r'value="([^"]*)"', tag.group())
    return unescape(value.group(1)) if value else ""


def test_it_fills_in_the_page_the_time_and_the_latest_request_id(client, make_user):
    user = make_user()
    Generation.objects.create(owner=user, kind="workbench", params={"prompt": SECRET_PROMPT},
                              state="done", request_id="req-page-run",
                              created_at=timezone.now() - timedelta(minutes=5),
                              choices=[{"index": 0, "text": "a secret completion"}])  # fmt: skip
    client.force_login(user)
    page = client.get("/feedback/new/?page=http://testserver/workbench/%3Frun%3D3").content.decode()
    assert _value(page, "page_url") == "http://testserver/workbench/?run=3"
    assert _value(page, "request_id") == "req-page-run"
    shown = timezone.datetime.fromisoformat(_value(page, "reported_at")).replace(
        tzinfo=timezone.UTC
    )
    assert abs((timezone.now() - shown).total_seconds()) < 5
    assert SECRET_PROMPT not in page and "secret completion" not in page

    # A later API call's id is the latest one.
    key, _ = ApiKey.objects.create_key(user, "k")
    ApiRequest.objects.create(request_id="req-api-call", key=key, key_prefix=key.prefix, user=user,
                              endpoint="/v1/completions")  # fmt: skip
    page = client.get("/feedback/new/", HTTP_HX_REQUEST="true").content.decode()
    assert _value(page, "request_id") == "req-api-call"
    assert "<html" not in page  # the dialog's fragment


def test_it_stores_what_the_fields_hold_and_shows_its_state(client, make_user, settings):
    user = make_user()
    client.force_login(user)
    fields = {"message": "The chart is blank", "page_url": "/inspect/", "reported_at": "2026-03-01 10:20:30",
              "request_id": "req-1"}  # fmt: skip
    response = client.post("/feedback/new/", fields, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Thank you" in response.content.decode()
    item = Feedback.objects.get()
    assert (item.owner, item.message, item.page_url, item.request_id) == (user, "The chart is blank",
                                                                          "/inspect/", "req-1")  # fmt: skip
    assert item.reported_at.isoformat() == "2026-03-01T10:20:30+00:00"
    assert mail.outbox == []  # mail is off by default (and sent only once committed)

    listed = client.get("/feedback/").content.decode()
    assert "The chart is blank" in listed and 'badge open">open<' in listed
    Feedback.objects.filter(pk=item.pk).update(resolved=True, reply="Fixed in the next release.")
    detail = client.get(f"/feedback/{item.pk}/").content.decode()
    assert 'id="feedback-state">resolved<' in detail and "Fixed in the next release." in detail

    # Without htmx: a page of its own, then the feedback's page.
    response = client.post("/feedback/new/", {**fields, "message": "Again"})
    assert response.status_code == 302 and response["Location"].startswith("/feedback/")


def test_it_refuses_an_empty_or_unstorable_message_and_stores_nothing(client, make_user):
    client.force_login(make_user())
    for message in ["", "a\x00b", "x" * 5001]:
        response = client.post("/feedback/new/", {"message": message, "page_url": "/"})
        assert response.status_code == 400
        assert 'role="alert"' in response.content.decode()
    response = client.post(
        "/feedback/new/", {"message": "", "page_url": "/"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "This field is required." in response.content.decode()
    assert not Feedback.objects.exists()


def test_it_mails_staff_when_mail_is_on(
    client, make_user, settings, django_capture_on_commit_callbacks
):
    settings.WEFT_NOTIFY_EMAIL = "infra@example.org"
    client.force_login(make_user(username="mo"))
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/feedback/new/", {"message": "Broken export", "page_url": "/batch/1/"})
    assert [m.to for m in mail.outbox] == [["infra@example.org"]]
    assert "Broken export" in mail.outbox[0].body and "from mo" in mail.outbox[0].subject
