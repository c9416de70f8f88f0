"""Stored job results count against their person's quota until they expire: the expiry
sweep deletes their rows, and the room is free at once for the next job."""

from datetime import timedelta

import pytest
from django.utils import timezone

from api.models import ApiKey
from api.quotas import stored_bytes
from completions import lifecycle
from completions.models import Generation
from tests.api.conftest import ASYNC, harvest_until

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Once", "max_tokens": 4}


def test_it_frees_the_room_when_a_result_expires(person_api, person_keys, stored_result):
    api, _ = person_api
    (a,) = person_keys(api, 1)
    key = ApiKey.objects.get(prefix=a.headers["authorization"].split()[1].partition(".")[0])
    old = stored_result(key, 39_500)
    assert stored_bytes(key.user_id) == 39_500
    assert a.post("/completions", json=BODY, headers=ASYNC).status_code == 429

    Generation.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert lifecycle.expire()["content"] == 1
    assert stored_bytes(key.user_id) == 0
    again = a.post("/completions", json=BODY, headers=ASYNC)
    assert again.status_code == 202, again.text
    harvest_until(a, f"/harvest/{again.json()['id']}", {"succeeded"})
