"""The bytes of job results a person keeps show on their Usage page against their quota
(their own, never another person's), and every person's together in /metrics."""

import pytest

from tests.metrics import parse_metrics, total

pytestmark = pytest.mark.django_db


def test_it_shows_each_persons_stored_bytes_and_the_total(
    client, make_user, make_key, stored_result, settings
):
    settings.WEFT_API_USER_STORED_BYTES = 1024**3
    a, b = make_user(), make_user()
    key, _ = make_key(user=a)
    stored_result(key, 12_345)

    client.force_login(a)
    page = client.get("/usage/").content.decode()
    assert 'id="usage-stored-bytes" data-bytes="12345">12.1 KiB<' in page
    assert 'id="usage-stored-quota" data-bytes="1073741824">1.0 GiB<' in page
    client.force_login(b)
    assert (
        'id="usage-stored-bytes" data-bytes="0">0 bytes<' in client.get("/usage/").content.decode()
    )

    scrape = client.get("/metrics")
    assert scrape.status_code == 200
    assert total(parse_metrics(scrape.content.decode()), "weft_api_stored_result_bytes") == 12_345
