"""Token ids from the backend's /tokenize and /detokenize (vLLM's server-root routes).

The door's count_tokens gives counts only and always with the tokenizer's default
special tokens; Inspect needs the ids themselves, under the page's add_special_tokens
setting, to label the first position and to find where a choice's continuation
starts. Both calls are the door's BackendClient methods (its headers, timeouts and
error mapping) and, like count_tokens, a backend without these routes (or failing) is
"unknown" (None) rather than an error: the seed's hosted API has no /tokenize.
"""

from __future__ import annotations

from completions.client import BackendClient
from completions.errors import BackendError, InvalidRequest

# No model's vocabulary comes near 2**24 ids (the largest are a few hundred thousand):
# the form refuses larger ids, and the vocabulary search never looks past this.
MAX_TOKEN_ID = 2**24 - 1


def tokenize(model_id: str, text: str, *, add_special_tokens: bool) -> list[int] | None:
    """The ids the backend's tokenizer gives ``text``; None when it cannot say."""
    try:
        with BackendClient("interactive", max_retries=0) as client:
            return client.tokenize(model_id, text, add_special_tokens=add_special_tokens)
    except BackendError:
        return None


def _ids_known(client: BackendClient, model_id: str, ids: list[int]) -> bool | None:
    """Whether /detokenize accepts every id (True/False); None when it cannot say."""
    try:
        client.detokenize(model_id, ids)
    except InvalidRequest:  # the backend's 400: an id it does not have
        return False
    except BackendError:
        return None
    return True


def out_of_vocabulary(model_id: str, ids: list[int]) -> tuple[list[int], int | None] | None:
    """The ids the model does not have, and its vocabulary size when found.

    None when the backend cannot tell (no /detokenize): the completion request then
    meets the backend's own check. The models list carries no vocabulary size, so on
    failure it is found by bisection on single-id /detokenize calls below
    MAX_TOKEN_ID + 1 (at most 25 calls whatever the ids), only on this error path."""
    negative = sorted({t for t in ids if t < 0})
    if negative:
        return negative, None
    with BackendClient("interactive", max_retries=0) as client:
        known = _ids_known(client, model_id, ids)
        if known is None or known:
            return None if known is None else ([], None)
        # Invariant: id lo is in the vocabulary, id hi is not.
        lo, hi = 0, min(max(ids), MAX_TOKEN_ID + 1)
        if not _ids_known(client, model_id, [lo]):
            return sorted(set(ids)), None
        if _ids_known(client, model_id, [hi]):
            # Larger than any vocabulary we search: name the ids past it.
            return sorted({t for t in ids if t > hi}), None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _ids_known(client, model_id, [mid]):
                lo = mid
            else:
                hi = mid
    size = hi
    return sorted({t for t in ids if t >= size}), size
