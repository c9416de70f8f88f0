"""key.touch() records last use, writing at most once a minute (the proxy calls it on
every request); budget_tokens() is the override or the setting."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from api.models import ApiKey

pytestmark = pytest.mark.django_db


def test_it_writes_once_a_minute(make_key):
    key, _ = make_key()
    assert key.last_used_at is None
    key.touch()
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        key.touch()
    assert len(queries) == 0 and ApiKey.objects.get(pk=key.pk).last_used_at == first
    stale = timezone.now() - timedelta(minutes=2)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=stale)
    other = ApiKey.objects.get(pk=key.pk)  # another process' copy, a minute behind
    other.touch()
    assert ApiKey.objects.get(pk=key.pk).last_used_at > first


def test_it_takes_the_override_or_the_setting(make_key, settings):
    settings.WEFT_API_KEY_MONTHLY_BUDGET = 321
    assert make_key()[0].budget_tokens() == 321
    assert make_key(budget=0)[0].budget_tokens() == 0  # an override of zero is a stop
