"""The HTTP side of completion jobs: submitting one (the proxy's `Prefer: respond-async`
hook), GET /v1/harvest/<id>?wait=S (a long-poll) and DELETE /v1/harvest/<id>.

A long-poll holds no database connection and no thread while it waits: it subscribes
to the job's Redis channel (the worker publishes when the job ends) and looks at the
row itself only when woken, or every RECHECK_SECONDS in case a message was lost (a Redis
restart). How many long-polls wait at once, across every web process, is counted in
Redis as leases; past WEFT_JOB_MAX_LONGPOLLS a harvest answers at once with the job as
it is, `X-Acs-Longpoll: declined` and `Retry-After`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import re
from typing import Any
from urllib.parse import parse_qsl

from asgiref.sync import sync_to_async
from django.conf import settings

from api import auth, jobs, ledger, limits
from api.errors import ERRORS, ApiError
from api.http import GZIP_MIN_BYTES, Request
from api.models import ApiKey, CompletionJob

log = logging.getLogger(__name__)

PREFIX = "/v1/harvest/"
ROUTE = "/v1/harvest/{id}"
RECHECK_SECONDS = 2.0
DECLINED_RETRY_AFTER = 1
_WAIT = re.compile(r"^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$")  # a plain non-negative number

# --- submitting (called by api.proxy) ------------------------------------------------------


class JobRequest:
    """A POST /v1/completions that asked for `Prefer: respond-async`."""

    def __init__(self, req: Request, data: Any) -> None:
        self.req = req
        self.idempotency_key = jobs.idempotency_key(req.headers)
        self.digest = jobs.body_digest(data)

    @classmethod
    def of(cls, req: Request, data: Any) -> JobRequest | None:
        return cls(req, data) if jobs.wants_async(req.headers) else None

    async def replayed(self, key: ApiKey) -> bool:
        """Answer with the job this Idempotency-Key made before (True), if any."""
        found = await sync_to_async(jobs.find_replay)(key, self.idempotency_key, self.digest)
        if found is None:
            return False
        await accepted(self.req, found)
        return True

    @staticmethod
    def check(plan: Any) -> None:
        if plan.params.stream:
            raise ApiError(
                "invalid_request",
                "a completion job is not streamed: drop stream (harvest the whole body "
                "later) or drop `Prefer: respond-async`",
                param="stream",
            )

    async def submit(self, key: ApiKey, plan: Any, res: ledger.Reservation) -> None:
        """Store and send the job, answer 202. The reservation now belongs to the job
        (the worker settles it); if no job is stored it is given back here."""
        req = self.req
        sub = jobs.Submission(
            key=key,
            request_id=req.id,
            model=plan.target.model.id,
            body=plan.upstream_body(),
            prompt_tokens=plan.prompt_tokens,
            prompt_exact=plan.exact,
            choice_count=plan.params.choice_count,
            max_tokens=plan.applied,
            clamped=plan.clamp_header() or "",
            workload=req.workload,
            idempotency_key=self.idempotency_key,
            digest=self.digest,
        )
        creating = asyncio.ensure_future(sync_to_async(jobs.create)(sub))
        try:
            job, created = await asyncio.shield(creating)
        except asyncio.CancelledError:
            # The client left mid-submission: the job is stored all the same (a retry
            # with its Idempotency-Key finds it), unless storing it failed.
            with contextlib.suppress(Exception):
                await creating
            if creating.exception() is not None:
                await _give_back(res, req, 499, "client_closed")
            raise
        except ApiError as exc:  # the race was won with another body: 422
            await _give_back(res, req, exc.status, exc.code)
            raise
        except Exception:
            await _give_back(res, req, 500, "internal_error")
            raise
        if not created:  # the same Idempotency-Key won a race a moment ago
            await _give_back(res, req, 202, "")
        await accepted(req, job)


async def _give_back(res: ledger.Reservation, req: Request, status: int, code: str) -> None:
    await asyncio.shield(
        ledger.settle(res, 0, 0, status=status, error_code=code, latency_ms=req.latency_ms(),
                      finished_at=ledger.timezone.now())
    )  # fmt: skip


async def accepted(req: Request, job: CompletionJob) -> None:
    headers = {"Location": f"{PREFIX}{job.public_id}", "Preference-Applied": "respond-async"}
    await send_job(req, 202, job, headers)


async def send_job(
    req: Request, status: int, job: CompletionJob, headers: dict[str, str] | None = None
) -> None:
    data = jobs.as_json(job)
    out = {"Content-Type": "application/json", **(headers or {})}
    if len(data) >= GZIP_MIN_BYTES and req.accepts_gzip:
        data = gzip.compress(data, compresslevel=5)
        out["Content-Encoding"] = "gzip"
        out["Vary"] = "Accept-Encoding"
    out["Content-Length"] = str(len(data))
    await req.start(status, out)
    await req.body(data)


# --- GET and DELETE /v1/harvest/<id> ----------------------------------------------------------


def public_id(req: Request) -> str:
    """The job id in the path. One that cannot be a job's ("job-" and 24 hex digits, as
    api.models.new_job_id makes them) is the same 404 as an unknown id, and Postgres is
    never asked (it refuses a NUL in text: that was a 500)."""
    from api.http import shown

    job_id = req.path.rstrip("/").removeprefix(PREFIX)
    if re.fullmatch(r"job-[0-9a-f]{24}", job_id) is None:
        raise ApiError("job_not_found", f"no job '{shown(job_id)}' for this key", param="id")
    return job_id


def wait_seconds(req: Request) -> float:
    """`wait` from the query: seconds, 0 up to WEFT_JOB_LONGPOLL_MAX_SECONDS."""
    query = req.scope.get("query_string", b"").decode()
    values = [v for name, v in parse_qsl(query, keep_blank_values=True) if name == "wait"]
    if not values:
        return 0.0
    bound = settings.WEFT_JOB_LONGPOLL_MAX_SECONDS
    if len(values) > 1 or not _WAIT.match(values[0]) or float(values[0]) > bound:
        raise ApiError(
            "invalid_request",
            f"wait must be a number of seconds from 0 to {bound:g} (given once)",
            param="wait",
        )
    return float(values[0])


async def _load(key: ApiKey, job_id: str) -> CompletionJob:
    job = await CompletionJob.objects.filter(key=key, public_id=job_id).afirst()
    if job is None:
        # Unknown, expired, or another key's: the same answer, so ids cannot be probed.
        raise ApiError("job_not_found", f"no job {job_id!r} for this key", param="id")
    return job


async def harvest(req: Request) -> None:
    key = await auth.authenticate(req.headers)
    # A client that leaves mid-wait gives its long-poll place back at once.
    await _recorded(req, key, req.until_disconnect(_harvest(req, key)))


async def _harvest(req: Request, key: ApiKey) -> None:
    async with limits.slot_for(key.pk, req.id):
        wait = wait_seconds(req)
        job = await _load(key, public_id(req))
    headers: dict[str, str] = {}
    if wait > 0 and not job.is_terminal:
        job, declined = await long_poll(req, job, wait)
        if declined:
            headers = {"X-Acs-Longpoll": "declined", "Retry-After": str(DECLINED_RETRY_AFTER)}
    await send_job(req, 200, job, headers)


async def cancel(req: Request) -> None:
    key = await auth.authenticate(req.headers)
    await _recorded(req, key, _cancel(req, key))


async def _cancel(req: Request, key: ApiKey) -> None:
    async with limits.slot_for(key.pk, req.id):
        job = await _load(key, public_id(req))
        job = await sync_to_async(jobs.cancel)(job)
    await send_job(req, 200, job)


async def _recorded(req: Request, key: ApiKey, work: Any) -> None:
    """Run a harvest handler and record its metadata row, as every /v1 request has."""
    from api.proxy import _meta

    code = ""
    try:
        await work
    except ApiError as exc:
        code = exc.code
        raise
    finally:
        row = {
            **_meta(req, key, "/v1/harvest"),
            "status": ERRORS[code].status if code else req.status,
        }
        row["error_code"] = code
        ledger.later(ledger.record(row))


# --- the long-poll -----------------------------------------------------------------------------

# KEYS: the waiting long-polls (member: request id, score: lease expiry in ms)
# ARGV: request id, most waiting, lease ms, key ttl ms
ENTER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
return 1
"""
WAITING_KEY = "weft:jobs:longpolls"
LEASE_SLACK_SECONDS = 10.0  # a process that dies mid-wait frees its place this much later


async def _enter(request_id: str, wait: float) -> bool:
    client = limits.redis_client()
    lease = int((wait + LEASE_SLACK_SECONDS) * 1000)
    ttl = int((settings.WEFT_JOB_LONGPOLL_MAX_SECONDS + LEASE_SLACK_SECONDS) * 2000)
    script = client.register_script(ENTER)
    args: list[str | int] = [request_id, settings.WEFT_JOB_MAX_LONGPOLLS, lease, ttl]
    return bool(await script(keys=[WAITING_KEY], args=args))


async def _leave(request_id: str) -> None:
    try:
        await limits.redis_client().zrem(WAITING_KEY, request_id)
    except Exception as exc:  # the lease runs out on its own
        log.warning("harvest: leaving the long-poll count failed: %s", type(exc).__name__)


async def _reload(job: CompletionJob) -> CompletionJob:
    found = await CompletionJob.objects.filter(pk=job.pk).afirst()
    return found if found is not None else job


async def long_poll(req: Request, job: CompletionJob, wait: float) -> tuple[CompletionJob, bool]:
    """Wait up to `wait` seconds for the job to end; (the job now, declined?)."""
    if not await _enter(req.id, wait):
        return job, True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    pubsub = None
    try:
        try:
            pubsub = limits.redis_client().pubsub()
            await pubsub.subscribe(jobs.channel(job.public_id))
        except Exception as exc:  # Redis away: look at the row now and then instead
            log.warning("harvest: subscribe failed: %s", type(exc).__name__)
            pubsub = None
        job = await _reload(job)  # after subscribing, so an end meanwhile is not missed
        while not job.is_terminal:
            left = deadline - loop.time()
            if left <= 0:
                break
            await _woken(pubsub, min(left, RECHECK_SECONDS))
            job = await _reload(job)
    finally:
        if pubsub is not None:
            try:
                await asyncio.shield(pubsub.aclose())
            except Exception as exc:
                log.warning("harvest: unsubscribe failed: %s", type(exc).__name__)
        await asyncio.shield(_leave(req.id))
    return job, False


async def _woken(pubsub: Any, timeout: float) -> None:
    if pubsub is None:
        await asyncio.sleep(min(timeout, 1.0))
        return
    try:
        # Returns at once for the subscription's confirmation: the caller looks again.
        await pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
    except Exception as exc:
        log.warning("harvest: waiting on Redis failed: %s", type(exc).__name__)
        await asyncio.sleep(min(timeout, 1.0))
