"""Help texts that depend on the chosen model: what its capabilities say (the logprobs
cap) and what its tokenizer does (whether add_special_tokens adds anything at all),
rather than the schema's general range."""

from __future__ import annotations

from django.core.cache import cache

from completions.client import BackendClient
from completions.errors import BackendError
from completions.schema import ModelInfo

CACHE_SECONDS = 300


def adds_special_tokens(model_id: str) -> bool | None:
    """Whether the model's tokenizer puts anything (a BOS) before a text when asked:
    one short text tokenized both ways, cached; None when the backend cannot say."""
    key = f"weft:adds-special:{model_id}"
    known = cache.get(key)
    if known is not None:
        return bool(known)
    try:
        with BackendClient("interactive") as client:
            with_special = client.tokenize(model_id, "a", add_special_tokens=True)
            without = client.tokenize(model_id, "a", add_special_tokens=False)
    except BackendError:
        return None
    adds = len(with_special) > len(without)
    cache.set(key, int(adds), CACHE_SECONDS)
    return adds


def model_hints(info: ModelInfo | None) -> dict[str, str]:
    """{field: help} for the fields whose honest help depends on `info`'s model."""
    if info is None:
        return {}
    hints = {
        "logprobs": f"0 – {info.max_logprobs} for {info.id}; top-k alternatives per token, "
        "empty = off",
    }
    adds = adds_special_tokens(info.id)
    if adds is True:
        hints["add_special_tokens"] = f"{info.id}'s tokenizer prepends its BOS token when on"
    elif adds is False:
        hints["add_special_tokens"] = (
            f"{info.id}'s tokenizer adds no special token: on and off send the same tokens"
        )
    return hints
