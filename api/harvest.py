"""The HTTP side of completion jobs: submitting one (the proxy's `Prefer: respond-async`
hook), GET /v1/harvest/<id>?wait=S (a long-poll) and DELETE /v1/harvest/<id>.

A long-poll holds no database connection and no thread while it waits: it subscribes
to the job's Redis channel (the worker publishes when the job ends) and looks at the
row itself only when woken, or every RECHECK_SECONDS in case a message was lost (a Redis
restart) — its status columns only, never the request or the result. How many
long-polls wait at once, across every web process, is counted in Redis as leases, and
one key holds at most WEFT_JOB_MAX_LONGPOLLS_PER_KEY of them, one person (all their keys)
at most WEFT_JOB_MAX_LONGPOLLS_PER_USER; past any of these a harvest
answers at once with the job as it is, `X-Acs-Longpoll: declined` and `Retry-After`.

A job's answer is streamed: the job object's opening, then its result read from
Postgres one ResultChunk at a time and passed on as it was stored (gzipped piece by
piece in a thread when the client accepts it), then its closing brace. Neither the
result nor its compressed form is ever held whole, nor encoded on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any
from urllib.parse import parse_qsl

from django.conf import settings

from api import auth, db, jobs, ledger, limits, quotas
from api.errors import ERRORS, ApiError
from api.http import GZIP_MIN_BYTES, GzipStream, Request
from api.models import ApiKey
from api.rows import finished_row
from completions.models import Generation

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
        found = await db.run(jobs.find_replay, key, self.idempotency_key, self.digest)
        if found is None:
            return False
        await accepted(self.req, found)
        return True

    @staticmethod
    async def check(key: ApiKey, plan: Any) -> None:
        """What refuses a job before anything is reserved."""
        if plan.params.stream:
            raise ApiError(
                "invalid_request",
                "a completion job is not streamed: drop stream (harvest the whole body "
                "later) or drop `Prefer: respond-async`",
                param="stream",
            )
        if jobs.has_nul(plan.params.prompt):
            raise ApiError(
                "invalid_request",
                "a job's prompt cannot hold U+0000 (it is stored until harvested); send it "
                "without `Prefer: respond-async`, or as token ids",
                param="prompt",
            )
        await db.run(jobs.check_room, key)
        vocab = quotas.vocab_size_of(plan.target.model)
        await db.run(quotas.check_stored_room, key, plan.params, plan.prompt_tokens,
                     plan.applied, vocab)  # fmt: skip

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
        creating = asyncio.ensure_future(db.run(jobs.create, sub))
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
        except ApiError as exc:  # the race was won with another body (422), or no room (429)
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


async def accepted(req: Request, job: Generation) -> None:
    headers = {"Location": f"{PREFIX}{job.public_id}", "Preference-Applied": "respond-async"}
    await send_job(req, 202, job, headers)


async def send_job(
    req: Request, status: int, job: Generation, headers: dict[str, str] | None = None
) -> None:
    """The job object, its result streamed in from Postgres a piece at a time."""
    opening, pieces, closing = await db.run(jobs.wire_parts, job)
    out = {"Content-Type": "application/json", **(headers or {})}
    size = len(opening) + (job.result_bytes if pieces else 0) + len(closing)
    zipper = GzipStream() if size >= GZIP_MIN_BYTES and req.accepts_gzip else None
    if zipper is not None:
        out["Content-Encoding"] = "gzip"
        out["Vary"] = "Accept-Encoding"
    else:
        out["Content-Length"] = str(size)
    if zipper is not None and not pieces:  # small enough to compress in one go here
        data = zipper.feed(opening + closing) + zipper.finish()
        out["Content-Length"] = str(len(data))
        await req.start(status, out)
        await req.body(data)
        return
    await req.start(status, out)
    await _send_part(req, zipper, opening)
    for piece in pieces:
        await _send_part(req, zipper, await db.run(jobs.read_piece, piece))
    tail = closing
    if zipper is not None:
        tail = await asyncio.to_thread(lambda: zipper.feed(closing) + zipper.finish())
    await req.body(tail)


async def _send_part(req: Request, zipper: GzipStream | None, data: bytes) -> None:
    if zipper is not None:
        # Compressing a megabyte takes tens of milliseconds: never on the event loop.
        data = await asyncio.to_thread(zipper.feed, data)
    if data:
        await req.body(data, more=True)


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


async def _load(key: ApiKey, job_id: str) -> Generation:
    job = await db.run(jobs.for_key, key, job_id)
    if job is None:
        # Unknown, expired, or another key's: the same answer, so ids cannot be probed.
        shown = repr(job_id) if jobs.is_job_id(job_id) else "with that id"
        raise ApiError("job_not_found", f"no job {shown} for this key", param="id")
    return job


async def harvest(req: Request) -> None:
    key = await auth.authenticate(req.headers)
    # A client that leaves mid-wait gives its long-poll place back at once.
    await _recorded(req, key, req.until_disconnect(_harvest(req, key)))


async def _harvest(req: Request, key: ApiKey) -> None:
    async with limits.slot_for(key.pk, req.id, user_id=key.user_id):
        wait = wait_seconds(req)
        job = await _load(key, public_id(req))
    headers: dict[str, str] = {}
    if wait > 0 and not job.is_terminal:
        job, declined = await long_poll(req, key, job, wait)
        if declined:
            headers = {"X-Acs-Longpoll": "declined", "Retry-After": str(DECLINED_RETRY_AFTER)}
    await send_job(req, 200, job, headers)


async def cancel(req: Request) -> None:
    key = await auth.authenticate(req.headers)
    await _recorded(req, key, _cancel(req, key))


async def _cancel(req: Request, key: ApiKey) -> None:
    async with limits.slot_for(key.pk, req.id, user_id=key.user_id):
        job = await _load(key, public_id(req))
        job = await db.run(jobs.cancel, job)
    await send_job(req, 200, job)


async def _recorded(req: Request, key: ApiKey, work: Any) -> None:
    """Run a harvest handler and record its metadata row, as every /v1 request has."""
    code = ""
    try:
        await work
    except ApiError as exc:
        code = exc.code
        raise
    finally:
        row = {
            **finished_row(req, key, "/v1/harvest"),
            "status": ERRORS[code].status if code else req.status,
        }
        row["error_code"] = code
        ledger.later(ledger.record(row))


# --- the long-poll -----------------------------------------------------------------------------

# KEYS: the waiting long-polls of every key, of this key, of its person (member:
# request id, score: lease expiry in ms). ARGV: request id, most waiting, most for one
# key, lease ms, key ttl ms, most for one person. A place is taken in all or in none.
ENTER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local most = {tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])}
for i = 1, 3 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= most[i] then return 0 end
end
for i = 1, 3 do
  redis.call('ZADD', KEYS[i], now + tonumber(ARGV[4]), ARGV[1])
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[5]))
end
return 1
"""
WAITING_KEY = "weft:jobs:longpolls"
LEASE_SLACK_SECONDS = 10.0  # a process that dies mid-wait frees its place this much later


def _key_waiting(key_id: int) -> str:
    return f"{WAITING_KEY}:key:{key_id}"


def _user_waiting(user_id: int) -> str:
    return f"{WAITING_KEY}:user:{user_id}"


async def _enter(request_id: str, key_id: int, wait: float, user_id: int) -> bool:
    client = limits.redis_client()
    lease = int((wait + LEASE_SLACK_SECONDS) * 1000)
    ttl = int((settings.WEFT_JOB_LONGPOLL_MAX_SECONDS + LEASE_SLACK_SECONDS) * 2000)
    script = client.register_script(ENTER)
    args: list[str | int] = [
        request_id,
        settings.WEFT_JOB_MAX_LONGPOLLS,
        settings.WEFT_JOB_MAX_LONGPOLLS_PER_KEY,
        lease,
        ttl,
        settings.WEFT_JOB_MAX_LONGPOLLS_PER_USER,
    ]
    places = [WAITING_KEY, _key_waiting(key_id), _user_waiting(user_id)]
    return bool(await script(keys=places, args=args))


async def _leave(request_id: str, key_id: int, user_id: int) -> None:
    try:
        client = limits.redis_client()
        async with client.pipeline(transaction=False) as pipe:
            pipe.zrem(WAITING_KEY, request_id)
            pipe.zrem(_key_waiting(key_id), request_id)
            pipe.zrem(_user_waiting(user_id), request_id)
            await pipe.execute()
    except Exception as exc:  # the lease runs out on its own
        log.warning("harvest: leaving the long-poll count failed: %s", type(exc).__name__)


async def _reload(job: Generation) -> Generation:
    found = await db.run(jobs.status_row, job.pk)
    return found if found is not None else job


async def long_poll(
    req: Request, key: ApiKey, job: Generation, wait: float
) -> tuple[Generation, bool]:
    """Wait up to `wait` seconds for the job to end; (the job now, declined?)."""
    if not await _enter(req.id, key.pk, wait, key.user_id):
        return job, True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    pubsub = None
    try:
        try:
            pubsub = limits.redis_client().pubsub()
            await pubsub.subscribe(jobs.channel(job.public_id or ""))
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
        await asyncio.shield(_leave(req.id, key.pk, key.user_id))
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
