"""Request validation for POST /v1/completions, as strict as the seed API.

Unknown fields, wrong types (booleans and strings are never numbers) and out-of-range
values are 400s naming the field. Deliberately hand-written and small: the engine must not
import Django, and Weft's own request schema lives in the completions door.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.sampling import SamplingParams

MAX_OUTPUT_WORK = 32_000  # prompt_count * n * max_tokens
MAX_SEED = 2**63 - 1
MAX_STOP = 4


class ApiError(Exception):
    """An error answered in the OpenAI envelope."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        code: str = "invalid_request",
        param: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.param = param
        self.type = type or ("invalid_request_error" if status < 500 else "server_error")
        self.headers = headers or {}

    def body(self, request_id: str) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message, "type": self.type}
        if self.param is not None:
            error["param"] = self.param
        return {"error": error, "request_id": request_id}


@dataclass
class CompletionRequest:
    """A validated request; ``prompts`` still holds strings until the model tokenizes."""

    model: str
    prompts: list[str | list[int]]
    max_tokens: int | None
    n: int = 1
    stop: list[str] = field(default_factory=list)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    seed: int | None = None
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    echo: bool = False
    stream: bool = False
    include_usage: bool = False
    continuous_usage_stats: bool = False
    add_special_tokens: bool = True
    user: str | None = None


COMPLETION_FIELDS = frozenset(
    "model prompt max_tokens n stop temperature top_p top_k min_p presence_penalty "
    "frequency_penalty repetition_penalty seed logprobs prompt_logprobs echo stream "
    "stream_options user add_special_tokens".split()
)
STREAM_OPTION_FIELDS = frozenset({"include_usage", "continuous_usage_stats"})


def _is_int(v: Any) -> bool:
    return type(v) is int


def _int(body: dict[str, Any], name: str, lo: int, hi: int, default: Any = None) -> Any:
    v = body.get(name)
    if v is None:
        return default
    if not _is_int(v):
        raise ApiError(f"'{name}' must be an integer", param=name)
    if not lo <= v <= hi:
        raise ApiError(f"'{name}' must be between {lo} and {hi}, got {v}", param=name)
    return v


def _float(
    body: dict[str, Any],
    name: str,
    lo: float,
    hi: float,
    default: float,
    *,
    lo_open: bool = False,
) -> float:
    v = body.get(name)
    if v is None:
        return default
    if type(v) not in (int, float) or not math.isfinite(v):
        raise ApiError(f"'{name}' must be a number", param=name)
    if v > hi or v < lo or (lo_open and v == lo):
        bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise ApiError(f"'{name}' must be in {bound}, got {v}", param=name)
    return float(v)


def _bool(body: dict[str, Any], name: str, default: bool) -> bool:
    v = body.get(name)
    if v is None:
        return default
    if type(v) is not bool:
        raise ApiError(f"'{name}' must be a boolean", param=name)
    return v


def parse_prompt(value: Any) -> list[str | list[int]]:
    """str | list[str] | list[int] | list[list[int]] -> a list of prompts."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value:
        raise ApiError(
            "'prompt' must be a string, a non-empty list of strings, a non-empty list of "
            "token ids, or a non-empty list of non-empty token-id lists",
            param="prompt",
        )
    if all(isinstance(v, str) for v in value):
        return list(value)
    if all(_is_int(v) for v in value):
        return [list(value)]
    if all(isinstance(v, list) for v in value):
        for ids in value:
            if not ids or not all(_is_int(t) for t in ids):
                raise ApiError(
                    "'prompt' batches of token ids must be non-empty lists of integers",
                    param="prompt",
                )
        return [list(ids) for ids in value]
    raise ApiError("'prompt' must not mix strings, token ids and lists", param="prompt")


def parse_completion(
    body: Any, *, default_model: str, known_models: set[str], max_logprobs: int
) -> CompletionRequest:
    if not isinstance(body, dict):
        raise ApiError("Request body must be a JSON object")
    for key in body:
        if key not in COMPLETION_FIELDS:
            raise ApiError(f"Unknown field '{key}'", param=key)

    model = body.get("model")
    if model is None:
        model = default_model
    elif not isinstance(model, str):
        raise ApiError("'model' must be a string", param="model")
    elif model not in known_models:
        raise ApiError(
            f"The model '{model}' does not exist; see GET /v1/models",
            code="model_not_found",
            param="model",
        )

    if "prompt" not in body or body["prompt"] is None:
        raise ApiError("'prompt' is required", param="prompt")
    prompts = parse_prompt(body["prompt"])

    max_tokens = _int(body, "max_tokens", 1, 1_000_000)
    n = _int(body, "n", 1, 16, 1)

    stop_raw = body.get("stop")
    if stop_raw is None:
        stop: list[str] = []
    elif isinstance(stop_raw, str):
        stop = [stop_raw]
    elif isinstance(stop_raw, list) and all(isinstance(s, str) for s in stop_raw):
        stop = list(stop_raw)
    else:
        raise ApiError("'stop' must be a string or a list of strings", param="stop")
    if len(stop) > MAX_STOP:
        raise ApiError(f"'stop' takes at most {MAX_STOP} strings", param="stop")
    if any(s == "" for s in stop):
        raise ApiError("'stop' strings must not be empty", param="stop")

    top_k = _int(body, "top_k", -1, 2**31 - 1, -1)
    if top_k == 0:
        raise ApiError("'top_k' must be -1 (disabled) or at least 1", param="top_k")
    sampling = SamplingParams(
        temperature=_float(body, "temperature", 0.0, 100.0, 1.0),
        top_p=_float(body, "top_p", 0.0, 1.0, 1.0, lo_open=True),
        top_k=top_k,
        min_p=_float(body, "min_p", 0.0, 1.0, 0.0),
        presence_penalty=_float(body, "presence_penalty", -2.0, 2.0, 0.0),
        frequency_penalty=_float(body, "frequency_penalty", -2.0, 2.0, 0.0),
        repetition_penalty=_float(body, "repetition_penalty", 0.0, 2.0, 1.0, lo_open=True),
    )
    seed = _int(body, "seed", 0, MAX_SEED)

    logprobs = _int(body, "logprobs", 0, 100)
    if logprobs is not None and logprobs > max_logprobs:
        raise ApiError(
            f"'logprobs' must be at most {max_logprobs} for this model", param="logprobs"
        )
    prompt_logprobs = _int(body, "prompt_logprobs", -1, 100)
    if prompt_logprobs is not None and prompt_logprobs > max_logprobs:
        raise ApiError(
            f"'prompt_logprobs' must be at most {max_logprobs} (or -1) for this model",
            param="prompt_logprobs",
        )

    echo = _bool(body, "echo", False)
    stream = _bool(body, "stream", False)
    add_special_tokens = _bool(body, "add_special_tokens", True)

    include_usage = continuous = False
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise ApiError("'stream_options' must be an object", param="stream_options")
        if not stream:
            raise ApiError(
                "'stream_options' is only allowed with stream: true", param="stream_options"
            )
        for key in options:
            if key not in STREAM_OPTION_FIELDS:
                raise ApiError(
                    f"Unknown field 'stream_options.{key}'", param=f"stream_options.{key}"
                )
        include_usage = _bool(options, "include_usage", False)
        continuous = _bool(options, "continuous_usage_stats", False)

    if stream and prompt_logprobs is not None and prompt_logprobs != 0:
        raise ApiError(
            "'prompt_logprobs' other than 0 is not available with stream: true",
            param="prompt_logprobs",
        )

    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise ApiError("'user' must be a string", param="user")

    if max_tokens is None and (len(prompts) > 1 or n > 1):
        raise ApiError(
            "'max_tokens' is required when n > 1 or the prompt is a batch", param="max_tokens"
        )
    if max_tokens is not None and len(prompts) * n * max_tokens > MAX_OUTPUT_WORK:
        raise ApiError(
            f"prompt_count x n x max_tokens = {len(prompts) * n * max_tokens} exceeds "
            f"{MAX_OUTPUT_WORK}",
            param="max_tokens",
        )

    return CompletionRequest(
        model=model,
        prompts=prompts,
        max_tokens=max_tokens,
        n=n,
        stop=stop,
        sampling=sampling,
        seed=seed,
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
        echo=echo,
        stream=stream,
        include_usage=include_usage,
        continuous_usage_stats=continuous,
        add_special_tokens=add_special_tokens,
        user=user,
    )
