"""The shapes of what /v1 answers, as the published spec (api/openapi.py) describes them:
the error envelope, the completion and its chunks, the completion job, the model list and
the health checks. Written here because no pydantic model validates them: the backend's
body passes through verbatim."""

from __future__ import annotations

from typing import Any

SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event: `data` is a completion chunk as JSON (the "
    "Completion shape, text so far in each choice's delta), and the last event's data is "
    "`[DONE]`.",
    "required": ["data"],
    "properties": {
        "data": {"type": "string"},
        "event": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}


_NULLABLE_STRING = {"type": ["string", "null"]}

RESPONSE_SCHEMAS: dict[str, Any] = {
    "ErrorEnvelope": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "type"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": _NULLABLE_STRING,
                    "errors": {
                        "description": "Every field error of a 400 (the first leads).",
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["code", "field", "message"],
                            "properties": {
                                "code": {"type": "string"},
                                "field": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                },
            },
            "request_id": {"type": "string", "description": "Equal to X-Request-Id."},
        },
    },
    "Completion": {
        "description": "vLLM's text_completion object, passed through verbatim.",
        "type": "object",
        "required": ["id", "object", "model", "choices"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "text_completion"},
            "created": {"type": "integer"},
            "model": {"type": "string", "description": "The checkpoint that served."},
            "choices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["index", "text"],
                    "properties": {
                        "index": {"type": "integer"},
                        "text": {"type": "string"},
                        "logprobs": {"type": ["object", "null"]},
                        "finish_reason": _NULLABLE_STRING,
                        "stop_reason": {"type": ["string", "integer", "null"]},
                        "prompt_logprobs": {"type": ["array", "null"]},
                    },
                },
            },
            "usage": {
                "type": ["object", "null"],
                "properties": {
                    "prompt_tokens": {"type": "integer"},
                    "completion_tokens": {"type": "integer"},
                    "total_tokens": {"type": "integer"},
                },
            },
        },
    },
    "CompletionJob": {
        "description": "A completion sent with `Prefer: respond-async`. Queued jobs expire "
        "after 24 h; request and result content is deleted 24 h after the job ends (it then "
        "reads `expired`, `expired_from` saying what it was); the compact row (id, "
        "Idempotency-Key, status, tokens) stays 7 days after completion.",
        "type": "object",
        "required": ["id", "object", "status", "created_at", "model", "max_tokens_clamped"],
        "properties": {
            "id": {"type": "string", "pattern": "^job-[0-9a-f]+$"},
            "object": {"const": "completion.job"},
            "status": {
                "enum": ["queued", "running", "succeeded", "failed", "cancelled", "expired"]
            },
            "created_at": {"type": "integer", "description": "Unix seconds."},
            "started_at": {"type": ["integer", "null"]},
            "finished_at": {"type": ["integer", "null"]},
            "expires_at": {
                "type": ["integer", "null"],
                "description": "When what is stored goes next: a queued job, or a finished "
                "job's content.",
            },
            "model": {"type": "string", "description": "The short id it was routed by."},
            "idempotency_key": _NULLABLE_STRING,
            "max_tokens_clamped": {
                "description": "The clamp decided at submission (as X-Acs-Max-Tokens-Clamped).",
                "type": ["object", "null"],
                "properties": {
                    "requested": {"type": "integer"},
                    "applied": {"type": "integer"},
                    "reason": {"enum": ["budget", "deadline", "deadline+budget"]},
                    "source": {"enum": ["client", "default"]},
                },
            },
            "usage": {
                "description": "Once settled: the tokens used and what the key was charged.",
                "type": ["object", "null"],
                "properties": {
                    "prompt_tokens": {"type": "integer"},
                    "completion_tokens": {"type": "integer"},
                    "total_tokens": {"type": "integer"},
                    "charged_tokens": {"type": "integer"},
                },
            },
            "cancel_requested": {"type": "boolean"},
            "expired_from": {"enum": ["queued", "succeeded", "failed", "cancelled", None]},
            "result": {"$ref": "#/components/schemas/Completion"},
            "error": {"$ref": "#/components/schemas/ErrorEnvelope"},
        },
    },
    "Model": {
        "type": "object",
        "required": ["id", "object", "root", "default", "capabilities"],
        "properties": {
            "id": {"type": "string", "description": "The short id to send as `model`."},
            "object": {"const": "model"},
            "root": {"type": "string", "description": "The checkpoint behind the short id."},
            "default": {"type": "boolean"},
            "max_model_len": {"type": ["integer", "null"]},
            "capabilities": {
                "type": "object",
                "required": ["max_logprobs", "full_vocab_max_prompt_tokens"],
                "properties": {
                    "max_logprobs": {"type": "integer"},
                    "full_vocab_max_prompt_tokens": {"type": "integer"},
                },
            },
        },
    },
    "ModelList": {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}},
        },
    },
    "Live": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"const": "ok"}},
    },
    "Health": {
        "type": "object",
        # `down` and `checks` only for this machine or the metrics token (core/views.py).
        "required": ["status"],
        "properties": {
            "status": {"enum": ["ok", "down"]},
            "down": {"type": "array", "items": {"type": "string"}},
            "checks": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["ok"],
                    "properties": {
                        "ok": {"type": "boolean"},
                        "ms": {"type": "number"},
                        "error": {"type": "string"},
                    },
                },
            },
        },
    },
}
