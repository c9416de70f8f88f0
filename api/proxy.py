"""The public /v1 API: an async proxy in the ASGI process, in front of the door.

POST /v1/completions validates with the door's schema (the one schema), fixes
max_tokens (injected default, deadline cut, budget clamp), reserves the worst case in
the key's monthly ledger, and passes the backend's answer through verbatim — streamed
frame by frame, or a JSON body chunk by chunk (gzip when asked). What was generated is
charged when the request ends, however it ends: finished, failed, cut, or the client
gone. GET /v1/models lists every routed model; POST /v1/chat/completions is refused as
the seed says. Nothing here logs or stores prompt or completion text.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
from django.conf import settings

from api import auth, bodies, ledger, limits, turns
from api.errors import ERRORS, ApiError
from api.harvest import JobRequest
from api.http import GZIP_MIN_BYTES, ClientGone, GzipStream, Request, log_bug
from api.rows import finished_row as _meta
from api.rows import request_row as _row
from api.upstream import upstream_error, usage_from_tail
from completions import budget, passthrough, pipeline
from completions.client import alist_models
from completions.errors import BackendError
from completions.schema import CompletionParams, ParamsInvalid, validate_params
from core import metrics

log = logging.getLogger(__name__)


async def close_connections() -> None:
    """Close this event loop's pools (database, Redis, backend): for tests and tools
    that run the proxy in a loop of their own."""
    await ledger.close_pool()
    await limits.close_client()
    await passthrough.close_client()
    turns.forget()


def window_tokens() -> int:
    """What a non-streaming request can generate inside the request window."""
    return max(1, int(settings.WEFT_API_REQUEST_WINDOW_SECONDS * settings.WEFT_API_DECODE_RATE))


# --- the request plan -------------------------------------------------------------------


@dataclass
class Plan:
    params: CompletionParams
    target: passthrough.Target
    prompt_tokens: int
    exact: bool  # prompt_tokens counted by the tokenizer (else a never-too-low bound)
    requested: int  # max_tokens asked for, or the injected default
    applied: int  # what will be sent
    source: str  # "client" | "default"
    reasons: list[str] = field(default_factory=list)

    def clamp_header(self) -> str | None:
        if not self.reasons:
            return None
        return (
            f"requested={self.requested},applied={self.applied},"
            f"reason={'+'.join(self.reasons)},source={self.source}"
        )

    def upstream_body(self) -> dict[str, Any]:
        body = self.params.to_body()
        body["max_tokens"] = self.applied
        if self.params.stream:
            # Always metered: the usage frame is dropped again if the client did not ask.
            body["stream_options"] = {**body.get("stream_options", {}), "include_usage": True}
        return body


async def _count(plan_target: passthrough.Target, params: CompletionParams) -> list[int] | None:
    return await passthrough.count_tokens(plan_target, params.prompts)


async def make_plan(data: Any) -> Plan:
    """The request's plan from the door's planning pieces (completions.pipeline): one
    model resolution, one validation, one token count (only when the plan needs it),
    the revalidation prompt_logprobs=-1 needs and the default max_tokens."""
    model_field = data.get("model") if isinstance(data, dict) else None
    try:
        to = await passthrough.target(model_field if isinstance(model_field, str) else None)
    except BackendError as exc:
        raise upstream_error(exc) from None
    try:
        params = validate_params(data, model=to.model)
        counted = None
        if pipeline.needs_count(params) and not all(isinstance(p, list) for p in params.prompts):
            counted = await _count(to, params)
        params, counts, exact = pipeline.with_counts(data, to.model, params, counted)
    except ParamsInvalid as exc:
        raise ApiError.from_invalid(exc) from None
    requested, source = pipeline.max_tokens_for(params, to.model, counts)
    plan = Plan(params, to, sum(counts), exact, requested, requested, source)
    if not params.stream:
        window = window_tokens()
        if requested > window and source == "client":
            raise ApiError(
                "deadline_infeasible",
                f"max_tokens={requested:,} cannot finish inside the request window "
                f"(~{window:,} tokens, {settings.WEFT_API_REQUEST_WINDOW_SECONDS:g} s); "
                f"send stream=true, or max_tokens ≤ {window:,}",
                param="max_tokens",
            )
        if requested > window:
            plan.applied = window
            plan.reasons.append("deadline")
    return plan


async def reserve(plan: Plan, key: Any, row: dict[str, Any], arrived: float) -> ledger.Reservation:
    """Reserve under the key's month row; clamp max_tokens to what is left. A clamp or
    refusal computed from the prompt's byte bound is re-checked with exact counts (the
    count, a call to the backend, outside the setup turn)."""
    choices = plan.params.choice_count
    for attempt in (0, 1):
        async with turns.turn(arrived):
            res = await ledger.reserve(
                row,
                user_id=key.user_id,
                key_id=key.pk,
                key_budget=key.budget_tokens(),
                allowance=key.allowance_tokens(),
                prompt_tokens=plan.prompt_tokens,
                choices=choices,
                max_tokens=plan.applied,
                tentative=not plan.exact and attempt == 0,
            )
        if res is not None:
            break
        counted = await _count(plan.target, plan.params)
        plan.exact = True  # best known, even when the backend cannot tokenize
        if counted is not None:
            plan.prompt_tokens = sum(counted)
    assert res is not None  # only a tentative reservation is None; the second is exact
    if res.clamped:
        plan.applied = res.max_tokens
        plan.reasons.append("budget")
    return res


# --- passing answers through ------------------------------------------------------------


class Meter:
    """What the client received: the backend's usage when it sent one, the tokens
    passed on (completions.budget.charge makes the bill of it)."""

    def __init__(self, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.usage: dict[str, Any] | None = None
        self.tokens = 0


TAIL_BYTES = 4096


def _upstream_headers(req: Request, response: httpx.Response | None, to: passthrough.Target):
    req.extra_headers["X-Acs-Upstream-Model"] = to.model.root or to.model.id
    gpu = response.headers.get("x-acs-upstream-gpu") if response is not None else None
    req.extra_headers["X-Acs-Upstream-Gpu"] = gpu or to.backend


def _backend_clamp(req: Request, response: httpx.Response, plan: Plan) -> None:
    """A backend that clamps too (e.g. another seed-style API behind this one): the client
    learns what was really applied, against what it asked of Weft."""
    theirs = response.headers.get("x-acs-max-tokens-clamped")
    if not theirs:
        return
    fields = dict(part.partition("=")[::2] for part in theirs.split(","))
    try:
        applied = int(fields.get("applied", ""))
    except ValueError:
        return
    if applied < plan.applied:
        plan.applied = applied
        for reason in fields.get("reason", "budget").split("+"):
            if reason not in plan.reasons:
                plan.reasons.append(reason)
        req.extra_headers["X-Acs-Max-Tokens-Clamped"] = plan.clamp_header() or theirs


async def pass_json(req: Request, plan: Plan, meter: Meter) -> str:
    """A non-streaming answer, inside the request window; gzip when asked and worth it.
    Returns "" or the error code of a body that broke after its headers went out (the
    response is then left incomplete, so the client cannot take it for a whole one)."""
    try:
        async with asyncio.timeout(settings.WEFT_API_REQUEST_WINDOW_SECONDS):
            response = await passthrough.open_completion(
                plan.target, plan.upstream_body(), workload=req.workload
            )
    except TimeoutError:
        raise ApiError(
            "upstream_deadline", "the backend did not answer inside the request window"
        ) from None
    except BackendError as exc:
        raise upstream_error(exc) from None
    try:
        _upstream_headers(req, response, plan.target)
        _backend_clamp(req, response, plan)
        headers = {"Content-Type": response.headers.get("content-type", "application/json")}
        length = response.headers.get("content-length")
        zipper = None
        if req.accepts_gzip and not (length and int(length) < GZIP_MIN_BYTES):
            zipper = GzipStream()
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept-Encoding"
        elif length:
            headers["Content-Length"] = length
        # The window bounds the generation, which is over once a non-streaming answer
        # starts: the body (tens of MB for a full vocabulary) then has the read timeout.
        tail = b""
        chunks = response.aiter_raw()
        try:
            chunk = await anext(chunks, b"")
        except httpx.HTTPError as exc:
            raise _body_error(exc) from None
        await req.start(200, headers)
        try:
            while True:
                tail = (tail + chunk)[-TAIL_BYTES:]
                if zipper is not None:
                    chunk = zipper.feed(chunk)
                if chunk:
                    await req.body(chunk, more=True)
                following = await anext(chunks, None)
                if following is None:
                    break
                chunk = following
        except httpx.HTTPError as exc:
            return _body_error(exc).code
        await req.body(zipper.finish() if zipper is not None else b"")
        meter.usage = usage_from_tail(tail)
        return ""
    finally:
        await response.aclose()


def _body_error(exc: httpx.HTTPError) -> ApiError:
    return upstream_error(passthrough.transport_error(exc))


DONE = b"data: [DONE]"


async def pass_stream(req: Request, plan: Plan, meter: Meter) -> str:
    """SSE frames passed on as they come; returns "" or the error code of a stream that
    failed after its headers went out (it then ends with an error frame, never [DONE])."""
    try:
        response = await passthrough.open_completion(
            plan.target, plan.upstream_body(), workload=req.workload
        )
    except BackendError as exc:
        raise upstream_error(exc) from None
    wants_usage = bool(plan.params.stream_options and plan.params.stream_options.include_usage)
    failure = ""
    try:
        _upstream_headers(req, response, plan.target)
        _backend_clamp(req, response, plan)
        await req.start(
            200,
            {
                "Content-Type": response.headers.get("content-type", "text/event-stream"),
                "Cache-Control": "no-cache",
            },
        )
        buffer = b""
        finished = False
        last = b""  # what came with [DONE]: it goes out with the response's end, in one send
        try:
            async for chunk in response.aiter_raw():
                buffer += chunk
                out: list[bytes] = []
                while (end := buffer.find(b"\n\n")) >= 0:
                    frame, buffer = buffer[: end + 2], buffer[end + 2 :]
                    if frame.startswith(DONE):
                        finished = True
                    elif b'"choices":[]' in frame:
                        meter.usage = _frame_usage(frame) or meter.usage
                        if not wants_usage:
                            continue
                    elif frame.startswith(b'data: {"error"') or b'"object":"error"' in frame:
                        failure = "upstream_error"  # the backend's own error frame, passed on
                    elif frame.startswith(b"data: {"):
                        meter.tokens += 1
                    out.append(frame)
                if finished:
                    last += b"".join(out)
                elif out:
                    await req.body(b"".join(out), more=True)
        except httpx.HTTPError as exc:
            broke: ApiError | None = upstream_error(passthrough.transport_error(exc))
        else:
            broke = None if finished else ApiError("upstream_error", "the stream ended early")
        if broke is not None:
            failure = broke.code
            # Headers are gone: say it in the stream, and never end it as if complete.
            error_frame = {
                "error": {
                    "code": broke.code,
                    "message": f"{broke.message} (before [DONE])",
                    "type": "server_error",
                    "param": None,
                },
                "request_id": req.id,
            }
            last += b"data: " + json.dumps(error_frame).encode() + b"\n\n"
        await req.body(last)
    finally:
        await response.aclose()
    return failure


def _frame_usage(frame: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(frame[len(b"data: ") :])
    except ValueError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    return usage if isinstance(usage, dict) else None


# --- endpoints --------------------------------------------------------------------------


async def completions(req: Request) -> None:
    key = await auth.authenticate(req.headers)
    # A small body (declared so) is read at once, as it costs nothing; a large one only
    # once the request has its place among the key's active requests.
    declared = req.headers.get("content-length", "")
    small = declared.isdigit() and int(declared) < bodies.BIG_BODY_BYTES
    raw = await req.read_body() if small else None
    await req.until_disconnect(_completions(req, key, raw, small), reads_body=not small)


async def _completions(req: Request, key: Any, raw: bytes | None, read: bool) -> None:
    row = _row(req, key, "/v1/completions")
    res: ledger.Reservation | None = None
    meter = Meter(0)
    failure = ""
    plan: Plan | None = None
    handed_off = False  # a job's reservation is the worker's to settle
    try:
        async with limits.slot_for(
            key.pk, req.id, partial(turns.turn, req.started), user_id=key.user_id
        ):
            # Read and parsed with a place taken: a key's flood of large bodies waits
            # in its own queue, and is never parsed on the event loop.
            if not read:
                raw = await req.read_body()
            data = await bodies.parse(raw, settings.WEFT_API_MAX_BODY_BYTES)
            job = JobRequest.of(req, data)  # Prefer: respond-async
            if job is not None and await job.replayed(key):
                return
            plan = await make_plan(data)
            if job is not None:
                await job.check(key, plan)
            row.update(model=plan.target.model.id, stream=bool(plan.params.stream))
            res = await reserve(plan, key, row, req.started)
            meter.prompt_tokens = plan.prompt_tokens
            if clamp := plan.clamp_header():
                req.extra_headers["X-Acs-Max-Tokens-Clamped"] = clamp
            if job is not None:
                handed_off = True
                await job.submit(key, plan, res)
            elif plan.params.stream:
                failure = await pass_stream(req, plan, meter)
            else:
                failure = await pass_json(req, plan, meter)
    except ApiError as exc:
        failure = exc.code
        from_upstream = ERRORS[exc.code].upstream or "X-Acs-Upstream-Error-Kind" in exc.headers
        if plan is not None and from_upstream and "X-Acs-Upstream-Model" not in req.extra_headers:
            _upstream_headers(req, None, plan.target)
        await req.error(exc)
    except (asyncio.CancelledError, ClientGone):
        failure = "client_closed"
        raise
    except Exception as exc:
        failure = "internal_error"
        log_bug(req, exc)
        await req.error(ApiError("internal_error", f"internal error; quote {req.id}"))
    finally:
        if not handed_off:
            _finish(req, row, res, meter, failure, plan)


def _finish(
    req: Request,
    row: dict[str, Any],
    res: ledger.Reservation | None,
    meter: Meter,
    failure: str,
    plan: Plan | None,
) -> None:
    """Settle the reservation (or record the refused request) off the response path."""
    status = 499 if failure == "client_closed" else (req.status or 500)
    bill = None
    if res is not None and plan is not None:  # a reservation always has its plan
        used = _charge(res, meter, plan, failure, req.latency_ms() / 1000, meter.prompt_tokens)
        bill = (used.prompt_tokens, used.completion_tokens)
    metrics.api_request(req, row, status, failure, bill)
    fields = {
        "status": status,
        "error_code": failure,
        "latency_ms": req.latency_ms(),
        "served_model": req.extra_headers.get("X-Acs-Upstream-Model", ""),
        "clamped": req.extra_headers.get("X-Acs-Max-Tokens-Clamped", ""),
        "finished_at": ledger.timezone.now(),
    }
    log.info("api %s key=%s status=%s code=%s request=%s ms=%s", row["endpoint"],
             row["key_prefix"], status, failure or "-", req.id, fields["latency_ms"])  # fmt: skip
    if res is None or plan is None:
        ledger.later(ledger.record({**row, **fields}))
        return
    ledger.later(_settle(res, meter, plan, fields, req.latency_ms() / 1000))


def _charge(
    res: ledger.Reservation, meter: Meter, plan: Plan, failure: str, elapsed: float, prompt: int
) -> budget.Charge:
    if plan.params.stream:
        end = budget.End.RECEIVED
    elif not failure:
        end = budget.End.ANSWERED  # a whole JSON answer: charged as a job's is
    elif failure == "client_closed":
        end = budget.End.HUNG_UP  # a JSON answer that never arrived
    else:
        end = budget.End.RECEIVED
    return budget.charge(
        res.reserved, usage=meter.usage, prompt_tokens=prompt, received=meter.tokens,
        max_tokens=res.max_tokens, choices=plan.params.choice_count, end=end, elapsed=elapsed,
    )  # fmt: skip


async def _settle(
    res: ledger.Reservation, meter: Meter, plan: Plan, fields: dict[str, Any], elapsed: float
) -> None:
    prompt = meter.prompt_tokens
    if budget.reported(meter.usage) is None and not plan.exact:
        # No usage from the backend (a cut, a client gone): count the prompt exactly
        # rather than charge its byte bound.
        counted = await _count(plan.target, plan.params)
        prompt = sum(counted) if counted is not None else prompt
    used = _charge(res, meter, plan, fields["error_code"], elapsed, prompt)
    await ledger.settle(res, used.prompt_tokens, used.completion_tokens, **fields)


def model_card(m: Any) -> dict[str, Any]:
    return {
        "id": m.id,
        "object": "model",
        "created": 0,
        "owned_by": "weft",
        "root": m.root,
        "default": m.default,
        "max_model_len": m.max_model_len,
        "capabilities": {
            "max_logprobs": m.max_logprobs,
            "full_vocab_max_prompt_tokens": m.full_vocab_max_prompt_tokens,
        },
    }


async def models(req: Request) -> None:
    key = await auth.authenticate(req.headers)
    code = ""
    try:
        async with limits.slot_for(key.pk, req.id, user_id=key.user_id):
            try:
                listed = await alist_models()
            except BackendError as exc:
                raise upstream_error(exc) from None
            await req.json(200, {"object": "list", "data": [model_card(m) for m in listed]})
    except ApiError as exc:
        code = exc.code
        raise
    finally:
        status = ERRORS[code].status if code else req.status
        row = {**_meta(req, key, "/v1/models"), "status": status, "error_code": code}
        metrics.api_request(req, row, status, code, None)
        ledger.later(ledger.record(row))


async def chat_completions(req: Request) -> None:
    key = await auth.authenticate(req.headers)
    await req.read_body()
    code = "chat_completions_unsupported"
    try:
        async with limits.slot_for(key.pk, req.id, user_id=key.user_id):
            raise ApiError(
                code,
                "there is no chat endpoint: these are base models with no chat template. "
                "Use POST /v1/completions (client.completions.create in the OpenAI SDK).",
            )
    except ApiError as exc:
        code = exc.code
        raise
    finally:
        row = _meta(req, key, "/v1/chat/completions")
        row.update(status=ERRORS[code].status, error_code=code)
        metrics.api_request(req, row, row["status"], code, None)
        ledger.later(ledger.record(row))
