"""The request schema: exactly the seed's rules for POST /v1/completions.

The one definition of them: the door validates every page's and API request with it,
and the local engine (`engine/protocol.py`) validates its requests with it too. So this
module imports no Django (tests/test_it_keeps_django_out_of_the_engine.py).

pydantic does the type and range work (strict mode: booleans and strings are never
numbers, a JSON integer is fine where a float is expected); the few cross-field
rules the seed states are model validators. Every failure becomes a FieldError
(code, field, message) so a form can show it next to its input and an API can
answer with the seed's 400 envelope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

MAX_OUTPUT_WORK = 32_000  # prompt_count * n * max_tokens
MAX_SEED = 2**63 - 1
MAX_STOP = 4
DEFAULT_MAX_LOGPROBS = 100
DEFAULT_FULL_VOCAB_MAX_PROMPT_TOKENS = 1024

# The seed's fields, as its reference lists them: what the published spec is checked
# against (tests/api/test_it_publishes_every_bound_in_the_spec.py).
FIELDS = (
    "model prompt max_tokens n stop temperature top_p top_k min_p presence_penalty "
    "frequency_penalty repetition_penalty seed logprobs prompt_logprobs echo stream "
    "stream_options user add_special_tokens"
).split()


@dataclass(frozen=True)
class ModelInfo:
    """One entry of GET /v1/models."""

    id: str
    root: str = ""
    max_model_len: int | None = None
    default: bool = False
    max_logprobs: int = DEFAULT_MAX_LOGPROBS
    full_vocab_max_prompt_tokens: int = DEFAULT_FULL_VOCAB_MAX_PROMPT_TOKENS
    vocab_size: int | None = None  # when the backend publishes it (the local engine)


@dataclass(frozen=True)
class FieldError:
    code: str
    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "field": self.field, "message": self.message}


class ParamsInvalid(ValueError):
    """The request breaks one or more of the seed's rules; `.errors` says which."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))

    def by_field(self) -> dict[str, list[FieldError]]:
        out: dict[str, list[FieldError]] = {}
        for error in self.errors:
            out.setdefault(error.field, []).append(error)
        return out

    def as_envelope(self, request_id: str = "") -> dict[str, Any]:
        """The seed's 400 body; the first error leads, all are listed under `errors`."""
        first = self.errors[0]
        body: dict[str, Any] = {
            "error": {
                "code": "invalid_request" if first.code != "model_not_found" else first.code,
                "message": f"{first.field}: {first.message}",
                "type": "invalid_request_error",
                "param": first.field,
                "errors": [e.as_dict() for e in self.errors],
            }
        }
        if request_id:
            body["request_id"] = request_id
        return body


def _custom(code: str, message: str) -> PydanticCustomError:
    return PydanticCustomError(code, message)


# Strict scalar types with the seed's bounds. allow_inf_nan=False: NaN is not a number
# anyone meant to send, and it would slip past every range check.
Temperature = Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False)]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
OpenProbability = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]
Penalty = Annotated[float, Field(ge=-2.0, le=2.0, allow_inf_nan=False)]
RepetitionPenalty = Annotated[float, Field(gt=0.0, le=2.0, allow_inf_nan=False)]

# WithJsonSchema only changes what the published spec says (the validators below
# already refuse empty lists and top_k=0); validation is untouched.
_TOKEN_IDS = {"type": "array", "items": {"type": "integer"}, "minItems": 1}
PromptType = Annotated[
    StrictStr | list[StrictStr] | list[StrictInt] | list[list[StrictInt]],
    Field(union_mode="left_to_right"),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
                _TOKEN_IDS,
                {"type": "array", "items": _TOKEN_IDS, "minItems": 1},
            ]
        }
    ),
]
TopK = Annotated[
    StrictInt,
    Field(ge=-1),
    WithJsonSchema(
        {"anyOf": [{"type": "integer", "const": -1}, {"type": "integer", "minimum": 1}]}
    ),
]
StopType = Annotated[
    StrictStr | Annotated[list[StrictStr], Field(max_length=MAX_STOP)],
    Field(union_mode="left_to_right"),
]


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: StrictBool | None = None
    continuous_usage_stats: StrictBool | None = None


class CompletionParams(BaseModel):
    """The seed's request body. Unset fields are left to the backend's defaults."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    model: StrictStr | None = None
    prompt: PromptType
    max_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    n: Annotated[StrictInt, Field(ge=1, le=16)] | None = None
    stop: StopType | None = None
    temperature: Temperature | None = None
    top_p: OpenProbability | None = None
    top_k: TopK | None = None
    min_p: Probability | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    repetition_penalty: RepetitionPenalty | None = None
    seed: Annotated[StrictInt, Field(ge=0, le=MAX_SEED)] | None = None
    logprobs: Annotated[StrictInt, Field(ge=0, le=DEFAULT_MAX_LOGPROBS)] | None = None
    prompt_logprobs: Annotated[StrictInt, Field(ge=-1, le=DEFAULT_MAX_LOGPROBS)] | None = None
    echo: StrictBool | None = None
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    user: StrictStr | None = None
    add_special_tokens: StrictBool | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt_not_empty(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not value:
                raise _custom("empty_prompt", "a prompt list must not be empty")
            if any(isinstance(item, list) and not item for item in value):
                raise _custom("empty_prompt", "a batch must not hold an empty token-id prompt")
        return value

    @field_validator("top_k")
    @classmethod
    def _top_k_not_zero(cls, value: int | None) -> int | None:
        if value == 0:
            raise _custom("out_of_range", "must be -1 (disabled) or at least 1")
        return value

    @field_validator("logprobs", "prompt_logprobs")
    @classmethod
    def _model_logprobs_cap(cls, value: int | None, info: ValidationInfo) -> int | None:
        model = (info.context or {}).get("model")
        if value is not None and model is not None and value > model.max_logprobs:
            raise _custom(
                "out_of_range", f"must be at most {model.max_logprobs} for model {model.id}"
            )
        return value

    @model_validator(mode="after")
    def _cross_field_rules(self, info: ValidationInfo) -> CompletionParams:
        if self.stream_options is not None and self.stream is not True:
            raise _field("stream_options", "requires_stream", "is only accepted with stream: true")
        if self.stream and self.prompt_logprobs not in (None, 0):
            raise _field(
                "prompt_logprobs",
                "incompatible_with_stream",
                "top-k or full-vocabulary prompt logprobs are not available with stream: true",
            )
        count = self.prompt_count
        n = self.n or 1
        if self.max_tokens is None and (count > 1 or n > 1):
            raise _field("max_tokens", "required", "is required for a batch of prompts or n > 1")
        if self.max_tokens is not None and count * n * self.max_tokens > MAX_OUTPUT_WORK:
            raise _field("max_tokens", "output_work_exceeded", output_work_message(
                count, n, self.max_tokens
            ))  # fmt: skip
        if self.prompt_logprobs == -1:
            context = info.context or {}
            model = context.get("model")
            limit = model.full_vocab_max_prompt_tokens if model else None
            lengths = context.get("prompt_tokens") or [
                len(p) for p in self.prompts if isinstance(p, list)
            ]
            if limit is not None and lengths and max(lengths) > limit:
                raise _field(
                    "prompt_logprobs",
                    "full_vocab_prompt_too_long",
                    full_vocab_too_long(limit, max(lengths)),
                )
        return self

    # -- derived values --------------------------------------------------------------

    @property
    def prompts(self) -> list[str | list[int]]:
        """The prompt as a list: one entry per prompt the request carries."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if p and all(isinstance(x, int) for x in p):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]

    @property
    def prompt_count(self) -> int:
        return len(self.prompts)

    @property
    def choice_count(self) -> int:
        return self.prompt_count * (self.n or 1)

    @property
    def worst_case_output(self) -> int:
        """prompt_count × n × max_tokens; an omitted max_tokens counts as the wrapper's
        largest injected default (32,000)."""
        return self.choice_count * (self.max_tokens or MAX_OUTPUT_WORK)

    def to_body(self) -> dict[str, Any]:
        """The JSON body for the wire: unset fields omitted."""
        return self.model_dump(exclude_none=True)

    def with_changes(self, **changes: Any) -> CompletionParams:
        """A copy with some fields replaced, validated again."""
        return CompletionParams.model_validate({**self.to_body(), **changes})


def output_work_message(count: int, n: int, max_tokens: int) -> str:
    return (
        f"prompt_count × n × max_tokens = {count} × {n} × {max_tokens} exceeds {MAX_OUTPUT_WORK:,}"
    )


def output_work_exceeded(data: Any) -> FieldError | None:
    """The output-work rule read off a parsed body before the whole body is validated
    (a cheap look at the prompt count: a body of a million prompts is refused by it
    without validating each); None when it cannot tell, or the body passes."""
    if not isinstance(data, dict):
        return None
    prompt = data.get("prompt")
    if not isinstance(prompt, list) or not prompt or all(type(x) is int for x in prompt[:1]):
        return None  # one prompt (text, or token ids): the rule is the schema's to apply
    n, max_tokens = data.get("n", 1), data.get("max_tokens", 1)
    n = n if type(n) is int and n >= 1 else 1
    max_tokens = max_tokens if type(max_tokens) is int and max_tokens >= 1 else 1
    if len(prompt) * n * max_tokens <= MAX_OUTPUT_WORK:
        return None
    message = output_work_message(len(prompt), n, max_tokens)
    return FieldError("output_work_exceeded", "max_tokens", message)


def default_max_tokens(max_model_len: int | None, prompt_tokens: int) -> int:
    """The wrapper's injected max_tokens for a single prompt with n=1: min(32,000, the
    room the prompt leaves in the model's context), at least 1 (the backend then says
    the context is exceeded)."""
    room = (max_model_len or MAX_OUTPUT_WORK) - prompt_tokens
    return max(1, min(MAX_OUTPUT_WORK, room))


def full_vocab_too_long(limit: int, longest: int) -> str:
    """The message of the full-vocabulary length rule (the engine checks it again once
    it has tokenized a text prompt)."""
    return (
        f"full-vocabulary prompt logprobs take prompts of at most {limit} tokens; "
        f"this one has {longest} — use a fixed top-k"
    )


def _field(field: str, code: str, message: str) -> PydanticCustomError:
    # Model-level errors have no location; the field travels in the context.
    return PydanticCustomError(code, message, {"field": field})


_TYPE_MESSAGES = {
    "prompt": "must be a string, a list of strings, a list of token ids, or a list of "
    "token-id lists (not mixed)",
    "stop": f"must be a string or a list of at most {MAX_STOP} strings",
    "stream_options": "must be an object",
}


def _code_for(error_type: str) -> str:
    if error_type == "extra_forbidden":
        return "unknown_field"
    if error_type == "missing":
        return "required"
    if error_type in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return "out_of_range"
    if error_type in ("finite_number",):
        return "out_of_range"
    if error_type in ("too_long",):
        return "too_many"
    if (
        error_type.endswith("_type")
        or error_type.endswith("_parsing")
        or error_type
        in (
            "model_type",
            "dict_type",
        )
    ):
        return "invalid_type"
    return error_type


def _field_errors(exc: ValidationError) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    raw = exc.errors(include_url=False)
    # Union members each report a failure; a field gets one message, so custom
    # (rule) errors win over the per-member type errors.
    raw.sort(key=_priority)
    for err in raw:
        ctx = err.get("ctx") or {}
        loc = [str(part) for part in err["loc"] if isinstance(part, str)]
        top = loc[0] if loc else ""
        if top in ("stream_options",) and len(loc) > 1 and loc[1] in StreamOptions.model_fields:
            field = f"stream_options.{loc[1]}"
        elif top == "stream_options" and len(loc) > 1 and err["type"] == "extra_forbidden":
            field = f"stream_options.{loc[1]}"
        else:
            field = ctx.get("field") or top
        if field in seen:
            continue
        seen.add(field)
        code = _code_for(err["type"])
        if code == "unknown_field":
            message = f"unknown field '{field}'"
        elif code == "required":
            message = "is required"
        elif code == "too_many":
            message = f"takes at most {MAX_STOP} strings"
        elif code == "invalid_type" and top in _TYPE_MESSAGES and "." not in field:
            message = _TYPE_MESSAGES[top]
        elif code == "invalid_type":
            message = err["msg"].replace("Input should be", "must be")
        else:
            message = err["msg"].replace("Input should be", "must be")
        errors.append(FieldError(code, field, message))
    return errors


_CUSTOM = {"empty_prompt", "out_of_range", "requires_stream", "incompatible_with_stream"}


def _priority(err: Any) -> int:
    if (err.get("ctx") or {}).get("field") or err["type"] in _CUSTOM:
        return 0
    return 1 if err["type"] == "too_long" else 2


def validate_params(
    data: Any,
    *,
    model: ModelInfo | None = None,
    prompt_tokens: list[int] | None = None,
) -> CompletionParams:
    """Validate a request body. `model` adds the per-model caps (max_logprobs,
    full_vocab_max_prompt_tokens); `prompt_tokens` (tokens per prompt, when known)
    lets the full-vocabulary length rule see text prompts. Raises ParamsInvalid."""
    if not isinstance(data, dict):
        raise ParamsInvalid([FieldError("invalid_type", "", "the body must be a JSON object")])
    try:
        return CompletionParams.model_validate(
            data, context={"model": model, "prompt_tokens": prompt_tokens}
        )
    except ValidationError as exc:
        raise ParamsInvalid(_field_errors(exc)) from None
