"""What one person may keep queued and stored through /v1, whatever number of keys.

Jobs: at most WEFT_API_MAX_JOBS_PER_KEY queued or running per key and
WEFT_API_USER_MAX_JOBS per person (all the user's keys together), counted under a
per-user advisory lock and the key's row lock, so that two submissions at once cannot
both take the last place.

Stored bytes: the job results a person keeps (ResultChunk rows, counted from the rows
themselves, so a result half written counts and an expired one — its rows deleted —
frees its room at once) stay under WEFT_API_USER_STORED_BYTES. A job is refused before
anything is reserved when its worst case cannot fit: never (400 invalid_request — it
could not fit even with nothing stored) or not now (429 queue_full, Retry-After until
the person's next stored result expires). A job that passes the quota while its body
streams in — several at once, or an estimate too low — is stopped: its rows deleted,
the job failed with queue_full and a message that says why.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Min
from django.utils import timezone

from api.errors import ApiError
from api.models import ApiKey
from completions.models import Generation, ResultChunk
from completions.schema import CompletionParams

JOB = Generation.Kind.JOB

# The worst case of a job's body, by what it asked for (rounded up from what the engine
# writes): a full-vocabulary or top-k prompt position's entry
# `"<id>":{"logprob":…,"rank":…,"decoded_token":…},` ≈ 52 bytes on SmolLM2 (7.7 MB for 3
# positions of 49,152); a generated token with logprobs (its token, logprob, offset)
# ≈ 64 bytes plus ≈ 40 per top_logprobs entry; a token's text, JSON-escaped, rarely more
# than 32 bytes; each choice's fixed fields.
PROMPT_ENTRY_BYTES = 64
TOKEN_LOGPROB_BYTES = 64
TOP_ENTRY_BYTES = 40
TOKEN_TEXT_BYTES = 32
CHOICE_BYTES = 256
BODY_BYTES = 1024
# When a backend does not publish its vocabulary (vLLM does not): above every common
# base model's (Llama 3: 128,256).
DEFAULT_VOCAB_SIZE = 131_072
NO_EXPIRY_RETRY_AFTER = 60.0
JOBS_LOCK = 29_001  # the advisory lock space of a person's job count


# --- queued jobs -----------------------------------------------------------------------


def queue_full(limit: int, *, person: bool) -> ApiError:
    who = "your keys together already have" if person else "this key already has"
    return ApiError(
        "queue_full",
        f"{who} {limit} jobs queued or running; harvest or cancel some first",
        retry_after=1.0,
    )


def check_jobs(key: ApiKey, *, lock: bool = False) -> None:
    """Raise queue_full when the key's or its person's jobs are at their cap. With
    `lock` (inside the transaction that stores the job) the user's row and then the
    key's are locked first, so the counts stay true until it commits."""
    if lock:
        # An advisory lock, not the user's row: the ledger locks rows of its own in
        # another order, and a row lock here met them in a deadlock under a flood.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [JOBS_LOCK, key.user_id])
        ApiKey.objects.select_for_update().filter(pk=key.pk).first()
    active = Generation.objects.filter(kind=JOB, state__in=Generation.ACTIVE)
    if active.filter(key=key).count() >= settings.WEFT_API_MAX_JOBS_PER_KEY:
        raise queue_full(settings.WEFT_API_MAX_JOBS_PER_KEY, person=False)
    if active.filter(owner_id=key.user_id).count() >= settings.WEFT_API_USER_MAX_JOBS:
        raise queue_full(settings.WEFT_API_USER_MAX_JOBS, person=True)


# --- stored bytes ----------------------------------------------------------------------


def stored_bytes(user_id: int) -> int:
    """The bytes of job results the person keeps now (every attempt's rows)."""
    return ResultChunk.objects.of_owner(user_id).stored_bytes()


def worst_case_bytes(params: CompletionParams, prompt_tokens: int, max_tokens: int,
                     vocab_size: int | None) -> int:  # fmt: skip
    """A bound on the body a job can store: its choices' texts, logprobs and prompt
    logprobs (vLLM repeats a prompt's prompt_logprobs in each of its n choices).
    `prompt_tokens` is over every prompt (exact or a bound), `max_tokens` as applied."""
    n = params.n or 1
    choices = params.choice_count
    generated = choices * max_tokens
    size = BODY_BYTES + choices * CHOICE_BYTES + generated * TOKEN_TEXT_BYTES
    if params.echo:
        size += n * prompt_tokens * TOKEN_TEXT_BYTES
    if params.logprobs is not None:
        per_token = TOKEN_LOGPROB_BYTES + (params.logprobs + 1) * TOP_ENTRY_BYTES
        echoed = n * prompt_tokens if params.echo else 0
        size += (generated + echoed) * per_token
    if params.prompt_logprobs is not None:
        k = params.prompt_logprobs
        entries = (vocab_size or DEFAULT_VOCAB_SIZE) if k == -1 else k + 1
        size += n * prompt_tokens * entries * PROMPT_ENTRY_BYTES
    return size


def check_stored_room(key: ApiKey, params: CompletionParams, prompt_tokens: int,
                      max_tokens: int, vocab_size: int | None) -> None:  # fmt: skip
    """Refuse a job whose worst-case result does not fit the person's stored-bytes
    quota: 400 when it never could, 429 queue_full while stored results take the room."""
    quota = settings.WEFT_API_USER_STORED_BYTES
    need = worst_case_bytes(params, prompt_tokens, max_tokens, vocab_size)
    if need > quota:
        raise ApiError(
            "invalid_request",
            f"this job's result could take up to {_size(need)}, more than the "
            f"{_size(quota)} of job results one person may keep; ask for fewer positions "
            "or alternatives (prompt_logprobs, logprobs, n, max_tokens), or send it "
            "without `Prefer: respond-async`",
            param="prompt_logprobs" if params.prompt_logprobs is not None else "max_tokens",
        )
    stored = stored_bytes(key.user_id)
    if stored + need > quota:
        raise ApiError(
            "queue_full",
            f"your stored job results take {_size(stored)} of {_size(quota)}; this job "
            f"could need {_size(need)} more. Results are deleted 24 h after their job "
            "ends (Retry-After: when the next goes)",
            retry_after=_next_expiry(key.user_id),
        )


def _next_expiry(user_id: int) -> float:
    holding = ResultChunk.objects.of_owner(user_id).values("generation_id")
    soonest = (
        Generation.objects.filter(pk__in=holding, state__in=Generation.TERMINAL)
        .exclude(state=Generation.State.EXPIRED)
        .aggregate(at=Min("expires_at"))["at"]
    )
    if soonest is None:  # only running jobs hold bytes: they end (or stop) soon
        return NO_EXPIRY_RETRY_AFTER
    # The expiry sweep runs every few minutes: the room is back by then.
    left = (soonest - timezone.now() + timedelta(seconds=300)).total_seconds()
    return float(max(1, math.ceil(left)))


class StoredBytesExceeded(Exception):
    """A job's body passed its person's quota while it was being stored."""


def over_quota(user_id: int) -> bool:
    return stored_bytes(user_id) > settings.WEFT_API_USER_STORED_BYTES


def stopped_error() -> ApiError:
    quota = settings.WEFT_API_USER_STORED_BYTES
    return ApiError(
        "queue_full",
        f"the job was stopped: its result passed the {_size(quota)} of job results one "
        "person may keep (with your other stored results); what it had stored is deleted. "
        "Harvest and let older results expire, or ask for less",
        retry_after=NO_EXPIRY_RETRY_AFTER,
    )


def summary(user: Any) -> dict[str, Any]:
    """The person's stored job results against the quota (the Usage page)."""
    quota = settings.WEFT_API_USER_STORED_BYTES
    stored = stored_bytes(user.pk)
    return {
        "stored": stored,
        "quota": quota,
        "stored_text": _size(stored),
        "quota_text": _size(quota),
        "percent": min(100, round(100 * stored / quota)) if quota else 100,
    }


def _size(value: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} bytes"


def vocab_size_of(model: Any) -> int | None:
    """The vocabulary a backend publishes for a model (the local engine does), if any."""
    value = getattr(model, "vocab_size", None)
    return value if isinstance(value, int) and value > 0 else None
