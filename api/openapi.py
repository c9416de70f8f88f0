"""The published OpenAPI 3.1 spec, generated on every call — never kept by hand.

The request body is pydantic's JSON schema of completions.schema.CompletionParams (the
very model that validates, so every bound is the one enforced); the error statuses and
their headers come from api.errors.ERRORS. What is written here is only what no
schema knows: the operations, their descriptions, which error codes each can return
and the headers; the response shapes are api/response_schemas.py.
"""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings

from api.errors import ERRORS
from api.response_schemas import RESPONSE_SCHEMAS, SSE_EVENT
from completions.schema import MAX_OUTPUT_WORK, CompletionParams

REF = "#/components/schemas/{model}"

# The seed's words for each field; pydantic supplies types and bounds.
FIELD_DOCS = {
    "model": "Short id from GET /v1/models. Omitted: the default model (the entry with "
    '"default": true) — set it explicitly; the response\'s `model` names the checkpoint '
    "that served. Unknown ids are a 400 model_not_found.",
    "prompt": "Raw text (no chat template), a batch of texts, token ids, or a batch of "
    "token-id lists. Mixed or empty lists are a 400; an empty string is accepted.",
    "max_tokens": "Tokens to generate per completion. A single prompt with n=1 may omit it "
    f"(the server injects min({MAX_OUTPUT_WORK:,}, remaining context)); batches and n > 1 "
    f"must set it, and prompt_count × n × max_tokens ≤ {MAX_OUTPUT_WORK:,}. It may be "
    "reduced to fit the key's budget (header X-Acs-Max-Tokens-Clamped).",
    "n": "Independently sampled completions per prompt.",
    "stop": "Strings that stop sampling (not included in the text); at most 4.",
    "temperature": "Sampling temperature; 0 is greedy. Default 1.0.",
    "top_p": "Nucleus sampling threshold, strictly positive; 1.0 disables. Default 1.0.",
    "top_k": "Keep the top k tokens; -1 disables (0 is a 400). vLLM-native: extra_body in the "
    "OpenAI SDK.",
    "min_p": "Minimum probability relative to the top token; 0 disables. vLLM-native.",
    "presence_penalty": "Additive penalty once a token has appeared. Default 0.",
    "frequency_penalty": "Additive penalty scaled by how often a token appeared. Default 0.",
    "repetition_penalty": "Multiplicative repetition penalty, strictly positive; 1.0 "
    "disables. vLLM-native.",
    "seed": "PRNG seed (a signed 64-bit integer, non-negative).",
    "logprobs": "Top-k logprobs per generated token (0: the sampled token's own). At most "
    "the model's capabilities.max_logprobs.",
    "prompt_logprobs": "Top-k logprobs at each prompt position; -1 is the full vocabulary "
    "(prompts up to capabilities.full_vocab_max_prompt_tokens, else 400 "
    "full_vocab_prompt_too_long). Top-k or -1 are not available with stream: true. "
    "vLLM-native.",
    "echo": "Prepend the prompt to each choice's text.",
    "stream": "Stream SSE chunks (text/event-stream), ending with `data: [DONE]`.",
    "stream_options": "Only with stream: true; unknown keys are a 400.",
    "user": "Free-form tag for your own bookkeeping.",
    "add_special_tokens": "Whether the tokenizer prepends BOS. Default true. vLLM-native.",
}

HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-Id": {
        "description": "Trace id of this request (equal to the body's request_id on "
        "errors); quote it in bug reports.",
        "schema": {"type": "string", "minLength": 1},
    },
    "X-Acs-Upstream-Model": {
        "description": "The checkpoint of the backend that served (or failed) this request.",
        "schema": {"type": "string"},
    },
    "X-Acs-Upstream-Gpu": {
        "description": "Which backend served (or failed) this request.",
        "schema": {"type": "string"},
    },
    "X-Acs-Upstream-Error-Kind": {
        "description": "On upstream-error responses: mirrors error.code.",
        "schema": {"type": "string"},
    },
    "X-Acs-Max-Tokens-Clamped": {
        "description": "Present when max_tokens was reduced: "
        "requested=N,applied=M,reason=budget|deadline|deadline+budget,source=client|default.",
        "schema": {
            "type": "string",
            "pattern": r"^requested=\d+,applied=\d+,reason=(budget|deadline|deadline\+budget),"
            r"source=(client|default)$",
        },
    },
    "Retry-After": {
        "description": "Seconds to wait before retrying (every 429, 502 and 503).",
        "schema": {"type": "string", "pattern": r"^\d+$"},
    },
    "Location": {
        "description": "Where to harvest the job: `/v1/harvest/<id>`.",
        "schema": {"type": "string", "pattern": r"^/v1/harvest/job-[0-9a-f]+$"},
    },
    "Preference-Applied": {
        "description": "`respond-async`: the request became a job (RFC 7240).",
        "schema": {"type": "string", "enum": ["respond-async"]},
    },
    "X-Acs-Longpoll": {
        "description": "`declined` on a harvest answered early (a normal 200 with the job as "
        "it is) because too many long-polls were already waiting; poll again after "
        "Retry-After.",
        "schema": {"type": "string", "enum": ["declined"]},
    },
    "X-Should-Retry": {
        "description": "`false` where a retry cannot help (504 upstream_deadline, 413, "
        "400 deadline_infeasible); openai-python then skips its retries.",
        "schema": {"type": "string", "enum": ["false"]},
    },
}

# Every operation reads its key from the database: it can find the database away.
_AUTH = ["missing_api_key", "invalid_api_key", "service_unavailable"]
_LIMITS = ["queue_full", "rate_limited"]
_UPSTREAM = ["upstream_error", "upstream_unavailable"]
HARVEST = "/v1/harvest/{id}"

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("/v1/completions", "post"): {
        "operationId": "createCompletion",
        "summary": "Continue a prompt (raw next-token generation, no chat template)",
        "description": "Validated strictly (unknown fields, out-of-range values and wrong "
        "types are a 400 listing every field error); the response passes through verbatim "
        "from the backend — `model` is the checkpoint that served. JSON, or SSE with "
        "stream: true. Bodies are gzip-compressed when the client accepts it.",
        "errors": [
            "invalid_request",
            "model_not_found",
            "full_vocab_prompt_too_long",
            "context_length_exceeded",
            "deadline_infeasible",
            *_AUTH,
            "request_too_large",
            "idempotency_key_reused",
            "budget_exceeded",
            *_LIMITS,
            "internal_error",
            *_UPSTREAM,
            "upstream_deadline",
        ],
    },
    (HARVEST, "get"): {
        "operationId": "harvestJob",
        "summary": "A completion job's state, and its result once it has one (long-poll)",
        "description": "With `wait=S` the answer comes as soon as the job ends, or after S "
        "seconds with the job as it is then; S is at most the bound below "
        "(WEFT_JOB_LONGPOLL_MAX_SECONDS). When too many long-polls already wait, the "
        "answer comes at once with `X-Acs-Longpoll: declined` and `Retry-After`. "
        "`result` (when succeeded) is the completion body exactly as POST /v1/completions "
        "returns it; `error` (when failed) is the error body it would have returned. Only "
        "the key that submitted the job can see it; any other id is a 404 job_not_found.",
        "errors": ["invalid_request", *_AUTH, "job_not_found", *_LIMITS, "internal_error"],
    },
    (HARVEST, "delete"): {
        "operationId": "cancelJob",
        "summary": "Cancel a completion job",
        "description": "A queued job is cancelled at once (nothing is charged); a running "
        "one is stopped within a heartbeat (the answer may still say running, with "
        "`cancel_requested`) and charged the prompt and what can have been generated. A "
        "finished job is returned unchanged.",
        "errors": ["invalid_request", *_AUTH, "job_not_found", *_LIMITS, "internal_error"],
    },
    ("/v1/models", "get"): {
        "operationId": "listModels",
        "summary": "The models this deployment serves, under their short ids",
        "description": "Exactly one entry has `default: true`; `root` is the checkpoint.",
        "errors": ["invalid_request", *_AUTH, *_LIMITS, "internal_error", *_UPSTREAM],
    },
    ("/v1/chat/completions", "post"): {
        "operationId": "createChatCompletion",
        "summary": "Not supported: these are base models",
        "description": "Always a 400 chat_completions_unsupported — use POST /v1/completions.",
        "errors": [
            "chat_completions_unsupported",
            "invalid_request",
            *_AUTH,
            "request_too_large",
            *_LIMITS,
            "internal_error",
        ],
    },
}


def _header_refs(names: list[str], required: set[str]) -> dict[str, Any]:
    out = {}
    for name in names:
        ref: dict[str, Any] = {"$ref": f"#/components/headers/{name}"}
        if name in required:
            # A $ref cannot carry `required`; spell the header out instead.
            ref = {**copy.deepcopy(HEADERS[name]), "required": True}
        out[name] = ref
    return out


def error_responses(codes: list[str]) -> dict[str, Any]:
    """One response per status, naming its codes (an enum on error.code), with the
    headers the table says go with them: required when every code there carries one."""
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(ERRORS[code].status, []).append(code)
    responses = {}
    for status, group in sorted(by_status.items()):
        specs = [ERRORS[c] for c in group]
        headers = ["X-Request-Id"]
        required = {"X-Request-Id"}
        for name, has in (
            ("Retry-After", [s.retry_after for s in specs]),
            ("X-Should-Retry", [s.should_retry is False for s in specs]),
            ("X-Acs-Upstream-Error-Kind", [s.upstream for s in specs]),
        ):
            if any(has):
                headers.append(name)
            if all(has):
                required.add(name)
        if any(s.upstream for s in specs):
            headers += ["X-Acs-Upstream-Model", "X-Acs-Upstream-Gpu"]
        lines = "\n".join(f"- `{c}` ({ERRORS[c].type}): {ERRORS[c].description}" for c in group)
        responses[str(status)] = {
            "description": f"Error; error.code is one of:\n{lines}",
            "headers": _header_refs(headers, required),
            "content": {
                "application/json": {
                    "schema": {
                        "allOf": [
                            {"$ref": "#/components/schemas/ErrorEnvelope"},
                            {
                                "type": "object",
                                "properties": {
                                    "error": {
                                        "type": "object",
                                        "properties": {"code": {"enum": group}},
                                    }
                                },
                            },
                        ]
                    },
                    "examples": {
                        code: {
                            "value": {
                                "error": {
                                    "code": code,
                                    "message": ERRORS[code].description,
                                    "type": ERRORS[code].type,
                                    "param": None,
                                },
                                "request_id": "req-3f2a9c1d",
                            }
                        }
                        for code in group
                    },
                }
            },
        }
    return responses


def request_schemas() -> dict[str, Any]:
    """CompletionParams' own JSON schema (every bound it validates), under its $defs
    moved to components, with the seed's field descriptions added."""
    schema = CompletionParams.model_json_schema(ref_template=REF, mode="validation")
    defs = schema.pop("$defs", {})
    schema["title"] = "CompletionRequest"
    for name, prop in schema["properties"].items():
        if name in FIELD_DOCS:
            prop["description"] = FIELD_DOCS[name]
    return {"CompletionRequest": schema, **defs}


WORKLOAD = {
    "name": "X-Acs-Workload",
    "in": "header",
    "required": False,
    "description": "`interactive` or `batch` (recorded per request for capacity planning; "
    "it does not change scheduling). Other values are ignored.",
    "schema": {"type": "string"},
}


PREFER = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "description": "`respond-async`: answer 202 with a completion job at once (validated, "
    "budgeted and clamped now, run on a worker) instead of the completion; harvest it at "
    "its Location. Not with stream: true. Other preferences are ignored.",
    "schema": {"type": "string"},
    "example": "respond-async",
}
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "With `Prefer: respond-async`: 1–255 printable ASCII characters. The same "
    "key and body give back the same job (no second run or charge) for as long as the job's "
    "metadata is kept (7 days); the same key with another body is a 422 "
    "idempotency_key_reused. Scoped to the API key. Ignored without respond-async.",
    "schema": {"type": "string"},
}


def _job_id_parameter() -> dict[str, Any]:
    return {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "The job's id (from the 202's body or Location). Any other string "
        "is a 404 job_not_found, as an unknown or expired id is.",
        "schema": {"type": "string", "pattern": "^job-[0-9a-f]{24}$"},
    }


def _wait_parameter() -> dict[str, Any]:
    bound = settings.WEFT_JOB_LONGPOLL_MAX_SECONDS
    return {
        "name": "wait",
        "in": "query",
        "required": False,
        "description": f"Seconds to wait for the job to end, 0 to {bound:g} (default 0: "
        "answer at once). Anything else is a 400 invalid_request.",
        "schema": {"type": "number", "minimum": 0, "maximum": bound},
    }


def _json(ref: str) -> dict[str, Any]:
    return {"schema": {"$ref": f"#/components/schemas/{ref}"}}


def _operation(path: str, method: str) -> dict[str, Any]:
    spec = OPERATIONS[(path, method)]
    op: dict[str, Any] = {
        key: spec[key] for key in ("operationId", "summary", "description") if key in spec
    }
    op["parameters"] = [WORKLOAD]
    ok_headers = _header_refs(["X-Request-Id"], {"X-Request-Id"})
    if path == "/v1/completions":
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": _json("CompletionRequest")},
        }
        ok_headers.update(
            _header_refs(
                ["X-Acs-Upstream-Model", "X-Acs-Upstream-Gpu", "X-Acs-Max-Tokens-Clamped"], set()
            )
        )
        ok = {
            "description": "The completion (JSON), or with stream: true its SSE chunks "
            "(`data: {chunk}` … `data: [DONE]`).",
            "headers": ok_headers,
            "content": {
                "application/json": _json("Completion"),
                # Before OpenAPI 3.2 (no itemSchema), `schema` describes each event.
                "text/event-stream": {"schema": SSE_EVENT},
            },
        }
        op["parameters"] = [WORKLOAD, PREFER, IDEMPOTENCY_KEY]
        accepted = {
            "description": "With `Prefer: respond-async`: the completion job (also for a "
            "replayed Idempotency-Key, in whatever state that job is now).",
            "headers": _header_refs(
                ["X-Request-Id", "Location", "Preference-Applied", "X-Acs-Max-Tokens-Clamped"],
                {"X-Request-Id", "Location", "Preference-Applied"},
            ),
            "content": {"application/json": _json("CompletionJob")},
        }
        op["responses"] = {"200": ok, "202": accepted}
    elif path == HARVEST:
        op["parameters"] = [WORKLOAD, _job_id_parameter()]
        if method == "get":
            op["parameters"].append(_wait_parameter())
        headers = ["X-Request-Id"] + (["X-Acs-Longpoll", "Retry-After"] if method == "get" else [])
        op["responses"] = {
            "200": {
                "description": "The job.",
                "headers": _header_refs(headers, {"X-Request-Id"}),
                "content": {"application/json": _json("CompletionJob")},
            }
        }
    elif path == "/v1/models":
        op["responses"] = {
            "200": {"description": "The models.", "headers": ok_headers, "content": {"application/json": _json("ModelList")}}
        }  # fmt: skip
    else:
        op["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
        op["responses"] = {}
    op["responses"].update(error_responses(spec["errors"]))
    return op


def build_spec(server_url: str | None = None) -> dict[str, Any]:
    """The whole OpenAPI 3.1 document; server_url is this server's root, when known."""
    paths: dict[str, Any] = {}
    for path, method in OPERATIONS:
        paths.setdefault(path, {})[method] = _operation(path, method)
    request_id = _header_refs(["X-Request-Id"], {"X-Request-Id"})
    paths["/health"] = {
        "get": {
            "operationId": "health",
            "summary": "Liveness: this server process answers (no key needed; asks nothing else)",
            "security": [],
            "responses": {
                "200": {
                    "description": "The process is alive.",
                    "headers": request_id,
                    "content": {"application/json": _json("Live")},
                },
            },
        }
    }
    paths["/health/ready"] = {
        "get": {
            "operationId": "ready",
            "summary": "Readiness: Postgres, Redis and at least one backend answer (no key needed)",
            "security": [],
            "responses": {
                "200": {"description": "Everything is up.", "headers": request_id, "content": {"application/json": _json("Health")}},
                "503": {"description": "Something is down: `down` names it.", "headers": request_id, "content": {"application/json": _json("Health")}},
            },
        }
    }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Weft API",
            "version": "1",
            "description": "OpenAI-compatible POST /v1/completions for raw next-token "
            "generation against base models, with vLLM-native extras. Every error is "
            '`{"error": {"code", "message", "type", ...}, "request_id"}`; every response '
            "carries X-Request-Id. Beyond the operations below: an unknown path under /v1 is "
            f"a {ERRORS['not_found'].status} `not_found`, another method on a listed path a "
            f"{ERRORS['method_not_allowed'].status} `method_not_allowed` (with `Allow`), and "
            "a query string on any operation a 400 `invalid_request` (only the harvest "
            "takes one, `wait`).",
        },
        "servers": [{"url": server_url or "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key from the API keys page: "
                    "`Authorization: Bearer <ACS_API_KEY>`.",
                }
            },
            "headers": copy.deepcopy(HEADERS),
            "schemas": {**request_schemas(), **copy.deepcopy(RESPONSE_SCHEMAS)},
        },
    }
