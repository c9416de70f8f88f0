"""The migration to one run model and one ledger, from rows as they were before it: the
pages' month rows become `pages:` accounts, each key's month its `key:` account and
the sum of a user's keys their `api:` account; every completion job becomes a run
with its public id, Idempotency-Key, state, tokens, error envelope and result, byte
for byte; a job still queued keeps its reservation (moved from its submission's row to
the run) and is claimed from the jobs' queue afterwards; a queued page run gets its
lane and queue. Then the migrated rows work: the job's result is harvested whole and
the queued job settles its reservation exactly once."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from api import jobs
from completions import lifecycle, scheduler
from completions.budget import month_of
from completions.models import BudgetMonth, Generation, ResultChunk

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("completions", "0002_generation_requeued_at_retry_after"), ("api", "0003_completionjob")]
RESULT = '{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" é"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}'


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)


def old_rows(apps) -> dict:
    User = apps.get_model("auth", "User")
    ApiKey = apps.get_model("api", "ApiKey")
    ApiKeyMonth = apps.get_model("api", "ApiKeyMonth")
    ApiRequest = apps.get_model("api", "ApiRequest")
    CompletionJob = apps.get_model("api", "CompletionJob")
    OldBudget = apps.get_model("completions", "BudgetMonth")
    OldGeneration = apps.get_model("completions", "Generation")
    month = month_of()
    now = timezone.now()
    user = User.objects.create(username="before-the-migration")
    keys = [
        ApiKey.objects.create(
            user=user, name=f"k{i}", prefix=f"weft-0000000{i}", secret_hash="0" * 64
        )
        for i in range(2)
    ]
    ApiKeyMonth.objects.create(key=keys[0], month=month, used=100, reserved=13)
    ApiKeyMonth.objects.create(key=keys[1], month=month, used=50, reserved=0)
    OldBudget.objects.create(user=user, month=month, used=700, reserved=40)
    page = OldGeneration.objects.create(
        owner=user, kind="workbench", params={"prompt": "x"}, state="queued", reserved_tokens=40,
        budget_month=month, expires_at=now + dt.timedelta(days=7),
    )  # fmt: skip
    done_request = ApiRequest.objects.create(
        request_id="req-old-done", key=keys[0], key_prefix=keys[0].prefix, user=user,
        endpoint="/v1/completions", status=202, settled=True, prompt_tokens=3,
        completion_tokens=2,
    )  # fmt: skip
    done = CompletionJob.objects.create(
        public_id="job-" + "a" * 24, key=keys[0], user=user, api_request=done_request,
        status="succeeded", model="scripted", idempotency_key="idem-1", body_sha256="d" * 64,
        request={"model": "scripted", "prompt": "hi", "max_tokens": 2}, result=RESULT,
        prompt_tokens=3, usage_prompt_tokens=3, usage_completion_tokens=2, charged_tokens=5,
        created_at=now, started_at=now, finished_at=now, attempts=1,
    )  # fmt: skip
    queued_request = ApiRequest.objects.create(
        request_id="req-old-queued", key=keys[0], key_prefix=keys[0].prefix, user=user,
        endpoint="/v1/completions", status=202, settled=False, reserved_tokens=13,
        budget_month=month,
    )  # fmt: skip
    queued = CompletionJob.objects.create(
        public_id="job-" + "b" * 24, key=keys[0], user=user, api_request=queued_request,
        status="queued", model="scripted", body_sha256="e" * 64, prompt_tokens=3,
        request={"model": "scripted", "prompt": "hi", "max_tokens": 5}, max_tokens=5,
        created_at=now, enqueued_at=now,
    )  # fmt: skip
    failed = CompletionJob.objects.create(
        public_id="job-" + "c" * 24, key=keys[1], user=user, status="failed", model="scripted",
        body_sha256="f" * 64, error_code="upstream_error", prompt_tokens=3, charged_tokens=3,
        usage_prompt_tokens=3, usage_completion_tokens=0,
        error={"error": {"code": "upstream_error", "message": "the backend failed",
                         "type": "server_error", "param": None}, "request_id": "req-x"},
        created_at=now, finished_at=now,
    )  # fmt: skip
    return {
        "user": user.pk,
        "keys": [k.pk for k in keys],
        "page": page.pk,
        "jobs": (done, queued, failed),
    }


def test_it_moves_every_row_and_keeps_them_working(settings):
    executor = migrate(BEFORE)
    try:
        made = old_rows(executor.loader.project_state(BEFORE).apps)
    finally:
        leaves = executor.loader.graph.leaf_nodes()
        migrate(leaves)
    user, (k0, k1) = made["user"], made["keys"]
    month = month_of()
    accounts = dict(BudgetMonth.objects.filter(user_id=user).values_list("account", "used"))
    assert accounts == {f"pages:{user}": 700, f"key:{k0}": 100, f"key:{k1}": 50, f"api:{user}": 150}
    assert BudgetMonth.objects.get(account=f"api:{user}", month=month).reserved == 13
    page = Generation.objects.get(pk=made["page"])
    assert (page.lane, page.queue) == ("interactive", scheduler.queue_for("interactive"))

    old_done, old_queued, old_failed = made["jobs"]
    done = Generation.objects.get(public_id=old_done.public_id)
    assert (done.kind, done.state, done.key_id, done.owner_id) == ("job", "done", k0, user)
    assert (done.idempotency_key, done.charged_tokens, done.result_bytes) == (
        "idem-1",
        5,
        len(RESULT.encode()),
    )
    assert jobs.as_json(done).endswith(b',"result":' + RESULT.encode() + b"}")
    assert ResultChunk.objects.filter(generation=done).count() == 1
    failed = Generation.objects.get(public_id=old_failed.public_id)
    assert jobs.head(failed)["status"] == "failed"
    assert jobs.head(failed)["error"]["error"]["code"] == "upstream_error"

    queued = Generation.objects.get(public_id=old_queued.public_id)
    assert (queued.state, queued.reserved_tokens, queued.queue) == (
        "queued",
        13,
        scheduler.queue_for("jobs"),
    )
    assert queued.api_request.settled  # the run holds the reservation now
    claimed = scheduler.claim_next(queued.queue, "after-the-migration")
    assert claimed.pk == queued.pk
    lifecycle.finish(claimed, "done", run_token="after-the-migration",
                     usage={"prompt_tokens": 3, "completion_tokens": 4})  # fmt: skip
    lifecycle.finish(claimed, "done", run_token="after-the-migration")  # once only
    shared = BudgetMonth.objects.get(account=f"api:{user}", month=month)
    key_month = BudgetMonth.objects.get(account=f"key:{k0}", month=month)
    assert (shared.reserved, shared.used) == (0, 157)
    assert (key_month.reserved, key_month.used) == (0, 107)
