"""Request validation for POST /v1/completions, as strict as the seed API.

The rules are the door's: `completions.schema` (pydantic, no Django) is the one
definition of every field, bound and cross-field rule, and the engine validates with it.
What is the engine's own is its answer: vLLM's error envelope with the first error, and
the checks only a backend can make (which models it serves; empty stop strings, which it
cannot match). Unknown fields, wrong types (booleans and strings are never numbers) and
out-of-range values are 400s naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from completions.schema import (
    MAX_OUTPUT_WORK,
    CompletionParams,
    FieldError,
    ModelInfo,
    ParamsInvalid,
    validate_params,
)
from engine.sampling import SamplingParams

__all__ = ["MAX_OUTPUT_WORK", "ApiError", "CompletionRequest", "parse_completion"]

# The door's codes the engine answers as they are; every other rule is invalid_request.
_OWN_CODES = {"model_not_found", "full_vocab_prompt_too_long"}


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

    @classmethod
    def from_field_error(cls, error: FieldError) -> ApiError:
        """The door's FieldError as the engine's 400, worded as the public API words it."""
        message = f"{error.field}: {error.message}" if error.field else error.message
        code = error.code if error.code in _OWN_CODES else "invalid_request"
        return cls(message, code=code, param=error.field or None)

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


def parse_completion(
    body: Any,
    *,
    default_model: str,
    known_models: set[str],
    max_logprobs: int,
) -> CompletionRequest:
    """Validate a request body with the door's schema; raises ApiError (the first error)."""
    model = body.get("model") if isinstance(body, dict) else None
    # The engine's caps are the door's defaults (full_vocab_max_prompt_tokens included).
    info = ModelInfo(
        id=model if isinstance(model, str) else default_model, max_logprobs=max_logprobs
    )
    try:
        params = validate_params(body, model=info)
    except ParamsInvalid as exc:
        raise ApiError.from_field_error(exc.errors[0]) from None
    if params.model is not None and params.model not in known_models:
        raise ApiError(
            f"The model '{params.model}' does not exist; see GET /v1/models",
            code="model_not_found",
            param="model",
        )
    stop = [params.stop] if isinstance(params.stop, str) else list(params.stop or [])
    if "" in stop:
        raise ApiError("stop: strings must not be empty", param="stop")
    options = params.stream_options
    return CompletionRequest(
        model=params.model or default_model,
        prompts=params.prompts,
        max_tokens=params.max_tokens,
        n=params.n or 1,
        stop=stop,
        sampling=_sampling(params),
        seed=params.seed,
        logprobs=params.logprobs,
        prompt_logprobs=params.prompt_logprobs,
        echo=bool(params.echo),
        stream=bool(params.stream),
        include_usage=bool(options and options.include_usage),
        continuous_usage_stats=bool(options and options.continuous_usage_stats),
        add_special_tokens=params.add_special_tokens is not False,
        user=params.user,
    )


def _sampling(params: CompletionParams) -> SamplingParams:
    """The request's sampling fields; an unset one keeps vLLM's default."""
    names = (
        "temperature top_p top_k min_p presence_penalty frequency_penalty repetition_penalty"
    ).split()
    given = {name: getattr(params, name) for name in names if getattr(params, name) is not None}
    # Any: the fields are float but top_k (int); SamplingParams' own types say which.
    values: dict[str, Any] = {k: (v if k == "top_k" else float(v)) for k, v in given.items()}
    return SamplingParams(**values)
