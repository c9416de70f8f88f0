"""Where each app shows a finished generation. Apps call register_result_url(kind, func)
in AppConfig.ready(); the consumer asks result_url(generation) at a terminal state."""

from collections.abc import Callable
from typing import Any

from django.urls import reverse

_RESULT_URLS: dict[str, Callable[[Any], str]] = {}


def register_result_url(kind: str, func: Callable[[Any], str]) -> None:
    _RESULT_URLS[kind] = func


def result_url(generation: Any) -> str:
    func = _RESULT_URLS.get(generation.kind)
    if func is not None:
        return func(generation)
    return reverse("generation_result", args=[generation.pk])
