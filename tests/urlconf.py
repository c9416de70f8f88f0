"""The project's URLconf for tests that must cover every view (the input fuzzer,
the ownership check): the named URLs, a user owning one of everything a path id can
name, and a digest of a user's data to compare before and after a request."""

from __future__ import annotations

import hashlib
from typing import Any

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver


def urlconf_names() -> dict[str, URLPattern]:
    """Every named URL of the project (admin excepted: staff only, Django's own)."""
    out: dict[str, URLPattern] = {}

    def walk(patterns, namespace: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if p.namespace == "admin":
                    continue
                ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
                walk(p.url_patterns, ns)
            elif p.name:
                out[f"{namespace}{p.name}"] = p

    walk(get_resolver().url_patterns, "")
    return out


def make_world(user) -> dict[str, Any]:
    """`user` owning one of everything a path id can name, and a client logged in as
    them: {"user", "ids" (path kwarg -> id, or a list of ids), "client"}."""
    from api.models import ApiKey
    from batch.models import Batch, BatchItem
    from completions.models import Generation
    from feedback.models import BudgetRequest, Feedback
    from loom import access
    from loom.models import Author, Expansion, Tree
    from workbench.models import Draft, Preset, Run, SavedPrompt

    tree = Tree.objects.create_from_prompt(user, "The owl sang")
    child = tree.root.add_child(" to the moon", author=Author.MODEL,
                                logprobs={"tokens": [" to", " the", " moon"],
                                          "token_logprobs": [-1.0, -0.5, -2.0],
                                          "top_logprobs": [{" to": -1.0, " at": -1.2}, None, None]})  # fmt: skip
    done = Generation.objects.create(
        owner=user, kind="workbench", params={"prompt": "x", "max_tokens": 2}, state="done",
        choices=[{"index": 0, "text": " a"}, {"index": 1, "text": " b"}],
    )  # fmt: skip
    loom = Generation.objects.create(
        owner=user, kind="loom", params={"prompt": "x"}, state="done",
        # Detached (an undone attach): it waits in Recover, and opening the node leaves it.
        target={"tree": tree.pk, "parent": child.pk, "detached": True},
        choices=[{"index": 0, "text": " c"}],
    )  # fmt: skip
    inspect = Generation.objects.create(
        owner=user, kind="inspect", params={"prompt": "x"}, state="done", choices=[],
        target={"mode": "score", "tab": "score", "rows": [
            {"position": 0, "id": 1, "text": "x", "logprob": None, "top": []}]},
    )  # fmt: skip
    run = Run.objects.save_generation(done, title="kept")
    Draft.objects.create(
        owner=user, values={"prompt": "a draft", "max_tokens": "abc"}, runs=[done.pk]
    )
    batch = Batch.objects.create(owner=user, title="b", params={"model": "scripted", "max_tokens": 2},
                                 total=2, state="done")  # fmt: skip
    batch_done = Generation.objects.create(
        owner=user, kind="workbench", workload="batch", params={"prompt": "y", "max_tokens": 2},
        state="done", choices=[{"index": 0, "text": " d"}], target={"batch": batch.pk},
    )  # fmt: skip
    item = BatchItem.objects.create(batch=batch, index=0, line=1, prompt="y", state="done",
                                    generation=batch_done, metadata={"id": 1},
                                    samples=[{"text": " d", "finish_reason": "length",
                                              "tokens": 1, "mean_logprob": -0.5}])  # fmt: skip
    failed = BatchItem.objects.create(batch=batch, index=1, line=2, prompt="z", state="failed",
                                      error_code="upstream_error")  # fmt: skip
    # Someone the tree is shared with (the share dialog's revoke names them).
    friend = type(user).objects.create_user(f"{user.get_username()}-friend")
    access.share(tree, friend, access.VIEWER)
    ids = {
        "user_id": friend.pk,
        "tree_id": tree.pk,
        "node_id": child.pk,
        "generation_id": [done.pk, loom.pk, inspect.pk],
        "run_id": run.pk,
        "preset_id": Preset.objects.create(owner=user, name="p", params={"n": 2}).pk,
        "prompt_id": SavedPrompt.objects.create(owner=user, name="s", prompt="hi").pk,
        "key_id": ApiKey.objects.create_key(user, "k")[0].pk,
        "feedback_id": Feedback.objects.create(owner=user, message="it broke").pk,
        "budget_request_id": BudgetRequest.objects.create(owner=user, amount=10, reason="more").pk,
        "batch_id": batch.pk,
        "item_id": [item.pk, failed.pk],
        "expansion_id": Expansion.objects.create(
            tree=tree, root=child, depth=1, breadth=2, body={"n": 2}, state="done"
        ).pk,
    }
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return {"user": user, "ids": ids, "client": client}


def snapshot(user) -> str:
    """The user's data, as a digest: what a refused request must leave alone."""
    from api.models import ApiKey
    from batch.models import Batch, BatchItem
    from completions.models import Generation, TokenBudget
    from feedback.models import BudgetRequest, Feedback
    from loom.models import Expansion, Node, Stack, Tree, UndoEntry
    from workbench.models import Draft, Preset, Run, Sample, SavedPrompt

    parts = [
        list(
            Tree.objects.filter(owner=user)
            .order_by("pk")
            .values_list(
                "pk",
                "title",
                "hoisted_id",
                "write_mode",
                "child_order",
                "hide_down",
                "memory",
                "note",
                "note_depth",
                "note_unit",
            )
        ),
        list(
            UndoEntry.objects.filter(tree__owner=user, stack=Stack.REDO)
            .order_by("pk")
            .values_list("pk", "label")
        ),
        list(Expansion.objects.filter(tree__owner=user).order_by("pk").values_list("pk", "state")),
        list(
            Node.objects.filter(tree__owner=user)
            .order_by("pk")
            .values_list("pk", "parent_id", "text", "tags", "bookmarked", "archived", "rating")
        ),
        list(Run.objects.filter(owner=user).order_by("pk").values_list("pk", "title", "note")),
        list(Sample.objects.filter(run__owner=user).order_by("pk").values_list("pk", "text")),
        list(Preset.objects.filter(owner=user).order_by("pk").values_list("pk", "name", "params")),
        list(SavedPrompt.objects.filter(owner=user).order_by("pk").values_list("pk", "name")),
        list(Draft.objects.filter(owner=user).values_list("pk", "values", "runs")),
        list(
            ApiKey.objects.filter(user=user).order_by("pk").values_list("pk", "name", "revoked_at")
        ),
        list(Batch.objects.filter(owner=user).order_by("pk").values_list("pk", "title", "state")),
        list(
            BatchItem.objects.filter(batch__owner=user)
            .order_by("pk")
            .values_list("pk", "prompt", "state", "generation_id", "samples")
        ),
        list(
            Feedback.objects.filter(owner=user)
            .order_by("pk")
            .values_list("pk", "message", "resolved")
        ),
        list(
            BudgetRequest.objects.filter(owner=user)
            .order_by("pk")
            .values_list("pk", "key_id", "amount", "state")
        ),
        list(TokenBudget.objects.filter(user=user).values_list("monthly_tokens")),
        # A request refused after it was sent records its outcome (failed/refused).
        list(
            Generation.objects.filter(owner=user)
            .exclude(state__in=["failed", "refused"])
            .order_by("pk")
            .values_list("pk", "state", "claimed_at")
        ),
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()
