"""Request starts per minute are capped per person as well as per key: a person whose
three keys together started 30 requests this minute (PERSON_ENV; each key may start 600)
is refused 429 rate_limited with Retry-After on every key, while another person is not."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "llama-8b", "prompt": "Quickly", "max_tokens": 1}


def test_it_refuses_a_person_past_the_rate_and_serves_another(person_api, person_keys):
    api, _ = person_api
    keys = person_keys(api, 3)
    (other,) = person_keys(api, 1)
    codes = [keys[i % 3].post("/completions", json=BODY).status_code for i in range(30)]
    assert codes == [200] * 30
    for client in keys:  # a fresh key is no way around it
        limited = client.post("/completions", json=BODY)
        assert limited.status_code == 429, limited.text
        assert limited.json()["error"]["code"] == "rate_limited"
        assert "your keys together" in limited.json()["error"]["message"]
        assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert other.post("/completions", json=BODY).status_code == 200
