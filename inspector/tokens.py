"""Token ids from the backend's /tokenize and /detokenize (vLLM's server-root routes).

The door's count_tokens gives counts only and always with the tokenizer's default
special tokens; Inspect needs the ids themselves, under the page's add_special_tokens
setting, to label the first position and to find where a choice's continuation
starts. It goes through the door's BackendClient (same headers, timeouts and base URL)
and, like count_tokens, treats a backend without these routes as "unknown" (None)
rather than an error: the seed's hosted API has no /tokenize.
"""

from __future__ import annotations

from typing import Any

import httpx

from completions.client import BackendClient, route
from completions.errors import BackendError

_MISSING = (404, 405, 501)


def _post(path: str, body: dict[str, Any]) -> httpx.Response | None:
    with BackendClient("interactive", max_retries=0) as client:
        try:
            to = route(body["model"])  # the model's own backend, under its own name
            return client._http.post(
                f"{to.backend.root}{path}",
                json={**body, "model": to.upstream or body["model"]},
                headers=client.headers(to.backend.api_key),
            )
        except (httpx.HTTPError, BackendError):
            return None


def tokenize(model_id: str, text: str, *, add_special_tokens: bool) -> list[int] | None:
    """The ids the backend's tokenizer gives ``text``; None when it cannot say."""
    response = _post(
        "/tokenize",
        {"model": model_id, "prompt": text, "add_special_tokens": add_special_tokens},
    )
    if response is None or response.status_code != 200:
        return None
    try:
        tokens = response.json()["tokens"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        return None
    return tokens


def _ids_known(model_id: str, ids: list[int]) -> bool | None:
    """Whether /detokenize accepts every id (True/False); None when it cannot say."""
    response = _post("/detokenize", {"model": model_id, "tokens": ids})
    if response is None or response.status_code in _MISSING or response.status_code >= 500:
        return None
    return response.status_code == 200


def out_of_vocabulary(model_id: str, ids: list[int]) -> tuple[list[int], int | None] | None:
    """The ids the model does not have, and its vocabulary size when found.

    None when the backend cannot tell (no /detokenize): the completion request then
    meets the backend's own check. The models list carries no vocabulary size, so on
    failure it is found by bisection on single-id /detokenize calls (about 17 for a
    50k vocabulary), which only happens on this error path."""
    negative = sorted({t for t in ids if t < 0})
    if negative:
        return negative, None
    known = _ids_known(model_id, ids)
    if known is None or known:
        return None if known is None else ([], None)
    lo, hi = 0, max(ids)  # id lo is in the vocabulary (checked below), id hi is not
    if not _ids_known(model_id, [lo]):
        return sorted(set(ids)), None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _ids_known(model_id, [mid]):
            lo = mid
        else:
            hi = mid
    size = hi
    return sorted({t for t in ids if t >= size}), size
