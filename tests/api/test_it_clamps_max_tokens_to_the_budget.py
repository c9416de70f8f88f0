"""The API clamps (the pages refuse): max_tokens is cut to what the key has left and the
response says so in X-Acs-Max-Tokens-Clamped; a non-streaming request without
max_tokens gets its default cut to the request window; nothing left is a 429."""

import httpx
import pytest

from api.models import ApiRequest
from completions.models import BudgetMonth
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "The capital of France is"
WINDOW = 390  # the test server's 30 s request window × 13 tokens/s


def prompt_tokens(engine: str) -> int:
    return httpx.post(f"{engine}/tokenize", json={"prompt": PROMPT}).json()["count"]


def post(base: str, secret: str, **body):
    return httpx.post(
        f"{base}/completions",
        json={"model": "llama-8b", "prompt": PROMPT, **body},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )


def settled(key):
    return wait_until(
        lambda: not ApiRequest.objects.filter(key=key, settled=False).exists()
        and ApiRequest.objects.filter(key=key).exists(),
        10, "settlement",
    )  # fmt: skip


def test_it_clamps_a_clients_max_tokens(proxy, make_key):
    base, backend = proxy
    p = prompt_tokens(backend.base)
    key, secret = make_key(budget=p + 10)
    response = post(base, secret, max_tokens=100, temperature=0)
    assert response.status_code == 200
    assert response.headers["x-acs-max-tokens-clamped"] == (
        "requested=100,applied=10,reason=budget,source=client"
    )
    assert backend.requests()[-1]["body"]["max_tokens"] == 10
    settled(key)
    month = BudgetMonth.objects.get(account=f"key:{key.pk}")
    usage = response.json()["usage"]
    assert (month.used, month.reserved) == (usage["total_tokens"], 0)
    assert month.used <= p + 10


def test_it_clamps_the_injected_default_of_a_stream(proxy, make_key):
    base, backend = proxy
    p = prompt_tokens(backend.base)
    _, secret = make_key(budget=p + 50)
    response = post(base, secret, stream=True)
    assert response.status_code == 200
    assert response.headers["x-acs-max-tokens-clamped"] == (
        f"requested={2048 - p},applied=50,reason=budget,source=default"
    )
    assert response.text.rstrip().endswith("data: [DONE]")


def test_it_cuts_the_default_to_the_request_window(proxy, make_key):
    base, backend = proxy
    p = prompt_tokens(backend.base)
    _, secret = make_key()
    response = post(base, secret)
    assert response.headers["x-acs-max-tokens-clamped"] == (
        f"requested={2048 - p},applied={WINDOW},reason=deadline,source=default"
    )
    _, tight = make_key(budget=p + 50)
    response = post(base, tight)
    assert response.headers["x-acs-max-tokens-clamped"] == (
        f"requested={2048 - p},applied=50,reason=deadline+budget,source=default"
    )
    # A streamed request keeps the full default.
    assert "x-acs-max-tokens-clamped" not in post(base, secret, stream=True, max_tokens=5).headers


def test_it_refuses_a_client_max_tokens_the_window_cannot_finish(proxy, api_key):
    base, backend = proxy
    response = post(base, api_key(), max_tokens=WINDOW + 1)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "deadline_infeasible"
    assert response.headers["x-should-retry"] == "false"
    assert backend.requests() == []


def test_it_answers_budget_exceeded_when_nothing_fits(proxy, make_key):
    base, backend = proxy
    p = prompt_tokens(backend.base)
    key, secret = make_key(budget=p)
    response = post(base, secret, max_tokens=5)
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "budget_exceeded"
    assert int(response.headers["retry-after"]) >= 1
    assert backend.requests() == []
    settled(key)
    assert ApiRequest.objects.get(key=key).status == 429
    assert not BudgetMonth.objects.filter(account=f"key:{key.pk}", reserved__gt=0).exists()


def test_it_passes_on_a_clamp_by_the_backend(proxy, api_key):
    base, backend = proxy
    backend.faults({"clamp": {"applied": 3}})
    response = post(base, api_key(), max_tokens=20)
    assert response.status_code == 200
    assert response.headers["x-acs-max-tokens-clamped"] == (
        "requested=20,applied=3,reason=budget,source=client"
    )
    assert response.json()["usage"]["completion_tokens"] <= 3
