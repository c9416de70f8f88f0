"""Automatic expansion: grow a node `depth` levels deep, `breadth` children at each node
(optionally taking only the best `keep` of each node's children further, by mean
logprob), as bulk work.

Before anything is sent the whole expansion's worst case — every request's prompt
(memory and author's note included) and max_tokens × n, over every level, as if no
child were left out — is reserved at once under the budget's lock, as a hold
(completions.budget.admit): the expansion is reserved whole or refused whole, however
many a user starts at once, and its requests draw on the hold, so a later level never
meets a budget spent meanwhile. What is left of the hold is released when it ends
(done, stopped, cancelled or deleted). Each node's generation is one of the door's
own: `pipeline.start(..., kind="loom", workload="batch", hold=...)` (streamed, so a
cancel stops it mid-way),
which sends it to the bulk workers' pool, where owners take turns. When one ends (the
door's generation_finished signal, in the worker) its children are attached and the
next level's generations start, in one transaction. Everything it adds is one undo
step: an undo entry made when it starts, whose steps grow as the nodes arrive.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import F
from django.db.models.expressions import RawSQL
from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.utils import timezone

from completions import budget, lifecycle, pipeline
from completions.budget import BudgetRefused
from completions.client import count_tokens, prompt_token_bound
from completions.errors import BackendError
from completions.models import Generation
from completions.schema import ParamsInvalid
from loom import generation as gen
from loom.context import Context
from loom.models import Expansion, LoomError, Node, Tree, UndoEntry
from loom.reading import MEAN_LOGPROB_SQL

log = logging.getLogger(__name__)

MAX_DEPTH, MAX_BREADTH = 6, 8
MAX_NODES = 2000  # the most children one expansion may make (as if none were left out)


class WorstCase(NamedTuple):
    requests: int  # generations sent
    nodes: int  # children made
    tokens: int  # prompt + completion tokens, at most


def worst_case(prompt_tokens: int, depth: int, breadth: int, max_tokens: int) -> WorstCase:
    """The most an expansion can cost if no child is left out: at level i (0 = the node
    expanded) breadth**i requests, each of n = breadth samples of max_tokens, on a prompt
    that has grown by at most max_tokens (+ 1, where two segments meet) per level."""
    requests = nodes = tokens = 0
    for level in range(depth):
        count = breadth**level
        requests += count
        nodes += count * breadth
        prompt = prompt_tokens + level * (max_tokens + 1)
        tokens += count * (prompt + breadth * max_tokens)
    return WorstCase(requests, nodes, tokens)


class ExpansionRefused(LoomError):
    """The expansion was not started (nothing was sent); the message says why."""


def _refusal(worst: WorstCase, left: int, depth: int, breadth: int, fits: str) -> str:
    text = (
        f"This expansion could use up to {worst.tokens:,} tokens ({worst.requests:,} "
        f"requests making up to {worst.nodes:,} nodes), but only {left:,} are left in this "
        "month's budget. Nothing was sent"
    )
    return text + (f": {fits}." if fits else "; nothing that size fits until the 1st (UTC).")


def _what_fits(prompt_tokens: int, depth: int, breadth: int, max_tokens: int, left: int) -> str:
    """The largest smaller expansions that fit: fewer levels, fewer children, shorter."""
    options = []
    for d in range(depth - 1, 0, -1):
        if worst_case(prompt_tokens, d, breadth, max_tokens).tokens <= left:
            options.append(f"a depth of {d} fits")
            break
    for b in range(breadth - 1, 0, -1):
        if worst_case(prompt_tokens, depth, b, max_tokens).tokens <= left:
            options.append(f"a breadth of {b} fits")
            break
    for m in (max_tokens // 2, max_tokens // 4, max_tokens // 8):
        if m >= 1 and worst_case(prompt_tokens, depth, breadth, m).tokens <= left:
            options.append(f"max_tokens {m:,} fits")
            break
    return "; ".join(options)


def start(user: Any, tree: Tree, node: Node, form: Any, *, depth: int, breadth: int,
          keep: int | None) -> Expansion:  # fmt: skip
    """Check the whole expansion against the budget and start its first request.
    Raises ExpansionRefused / gen.FormInvalid / ParamsInvalid / BackendError; then
    nothing was sent."""
    if not 1 <= depth <= MAX_DEPTH or not 1 <= breadth <= MAX_BREADTH:
        raise ExpansionRefused(
            f"Expand 1 to {MAX_DEPTH} levels deep and 1 to {MAX_BREADTH} children wide."
        )
    if keep is not None and not 1 <= keep <= breadth:
        raise ExpansionRefused(f"Keep 1 to {breadth} children of each node, or leave it empty.")
    bodies = gen.params_for_models(tree, form)
    if len(bodies) > 1:
        raise ExpansionRefused("An expansion uses one model: tick none, or one.")
    body = {**bodies[0], "n": breadth}
    context = Context.of(tree)
    first = gen.request_for(node.full_text(), context, body)
    model = first.get("model") or (gen.lookup_model("") or _no_model()).id
    first["model"] = body["model"] = model
    max_tokens = body.get("max_tokens") or gen.effective_settings(tree)["max_tokens"]
    first["max_tokens"] = body["max_tokens"] = max_tokens
    counts = count_tokens(model, first["prompt"])
    prompt_tokens = counts[0] if counts else prompt_token_bound(first["prompt"])
    worst = worst_case(prompt_tokens, depth, breadth, max_tokens)
    if worst.nodes > MAX_NODES:
        raise ExpansionRefused(
            f"{depth} levels of {breadth} could make {worst.nodes:,} nodes; an expansion "
            f"makes at most {MAX_NODES:,}."
        )
    try:
        expansion = _admit(user, tree, node, depth, breadth, keep, body, context, worst, first)
    except BudgetRefused as refusal:
        fits = _what_fits(prompt_tokens, depth, breadth, max_tokens, refusal.left)
        raise ExpansionRefused(_refusal(worst, refusal.left, depth, breadth, fits)) from None
    log.info("expansion %s: %s x %s started", expansion.pk, depth, breadth)
    return expansion


def _admit(user: Any, tree: Tree, node: Node, depth: int, breadth: int, keep: int | None,
           body: dict, context: Context, worst: WorstCase, first: dict) -> Expansion:  # fmt: skip
    """The expansion, its worst case held and its first request sent — or, when the
    hold does not fit, none of it (BudgetRefused)."""
    with transaction.atomic():
        Node.objects.select_for_update().filter(pk=node.pk).first()
        if any(lifecycle.check_alive(g).state in Generation.ACTIVE for g in gen.running_for(node)):
            raise ExpansionRefused(f"Node {node.pk} is already generating: wait for it first.")
        label = f"expand {depth} × {breadth} from node {node.pk}"
        entry = UndoEntry.objects.create(tree=tree, action="batch", label=label[:100],
                                         data={"steps": []})  # fmt: skip
        tree.redo_log.all().delete()  # a new change ends what could be redone
        expansion = Expansion.objects.create(
            tree=tree, root=node, depth=depth, breadth=breadth, keep=keep,
            body={k: v for k, v in body.items() if k != "prompt"}, context=context.record(),
            worst_case_tokens=worst.tokens, undo_entry=entry,
        )  # fmt: skip
        budget.admit(user, prompt_tokens=worst.tokens, choices=1, max_tokens=0,
                     hold=hold_name(expansion.pk))  # fmt: skip
        _send(user, expansion, node, first, level=0)
    return expansion


def hold_name(expansion_id: int) -> str:
    return f"expansion:{expansion_id}"


def _no_model():
    raise BackendError("backend_unavailable", "No model is served now.")


def _send(user: Any, expansion: Expansion, node: Node, body: dict, *, level: int) -> None:
    """One node's generation, as bulk work (inside the caller's transaction)."""
    target = gen.target_for(
        expansion.tree, node, Context.from_record(expansion.context), expansion=expansion.pk,
        level=level,
    )  # fmt: skip
    if not expansion.context:
        target.pop("context", None)
    # Streamed although nobody watches: a cancel then stops a request mid-way.
    pipeline.start(
        user, body, kind=gen.KIND, target=target, workload="batch", hold=hold_name(expansion.pk)
    )
    Expansion.objects.filter(pk=expansion.pk).update(started=F("started") + 1)


def attach_finished(generation: Generation) -> list[Node] | None:
    """A finished generation of an expansion: its children attached (a step of the
    expansion's undo entry) and, while the expansion runs and is not deep enough yet,
    the next level started for them (the best `keep` of them, if set). Called by
    loom.generation.materialize, once per generation."""
    with transaction.atomic():
        g = Generation.objects.select_for_update().get(pk=generation.pk)
        target = g.target or {}
        if g.claimed_at is not None or not g.is_terminal or target.get("detached"):
            return None
        expansion = Expansion.objects.select_for_update().filter(pk=target["expansion"]).first()
        parent = gen.target_parent(g)
        if parent is None:  # its node is gone: Recover has it
            _leave_for_recover(g)
            if expansion is not None:
                _count(expansion, finished=1)
            return None
        if expansion is None:
            return gen.materialize_plain(g)  # as any Loom generation
        entry = (
            UndoEntry.objects.select_for_update().filter(pk=expansion.undo_entry_id).first()
            if expansion.undo_entry_id
            else None
        )
        if entry is None and expansion.is_running:
            # Its undo step was undone (or trimmed away): it stops, and this text is
            # left for Recover rather than added behind the user's back.
            _stop(expansion, Expansion.State.CANCELLED, "Stopped: its step was undone.")
            _leave_for_recover(g)
            _count(expansion, finished=1)
            return None
        if g.state == Generation.State.CANCELLED:
            # Stopped by the expansion's cancel: only what had finished stays. A partial
            # text is left for Recover (never thrown away); an empty one is done with.
            if not any(c.get("text") for c in g.choices or []):
                g.claim()
            else:
                _leave_for_recover(g)
            _count(expansion, finished=1)
            return None
        made = gen.attach(g, parent, log=False)
        if made and entry is not None:
            step = {"action": "attach", "data": {"nodes": [n.pk for n in made],
                                                 "generation": g.pk, "focus": parent.pk}}  # fmt: skip
            entry.data = {"steps": [*entry.data.get("steps", []), step]}
            entry.label = (
                f"expand from node {expansion.root_id} ({expansion.nodes + len(made)} nodes)"[:100]
            )
            entry.save(update_fields=["data", "label"])
        _count(expansion, finished=1, nodes=len(made))
        level = int(target.get("level", 0))
        if expansion.is_running and made and level + 1 < expansion.depth:
            _next_level(g, expansion, made, level + 1)
        expansion.refresh_from_db()
        if expansion.is_running and expansion.finished >= expansion.started:
            _stop(expansion, Expansion.State.DONE, "")
        return made


def _leave_for_recover(g: Generation) -> None:
    """Not attached, once and for all (Recover can attach it anywhere)."""
    Generation.objects.filter(pk=g.pk).update(target={**(g.target or {}), "detached": True})


def _next_level(g: Generation, expansion: Expansion, made: list[Node], level: int) -> None:
    chosen = made
    if expansion.keep is not None and expansion.keep < len(made):
        scored = (
            Node.objects.filter(pk__in=[n.pk for n in made])
            .annotate(mean=RawSQL(MEAN_LOGPROB_SQL, []))
            .values_list("pk", "mean")
        )
        mean = dict(scored)
        ranked = sorted(made, key=lambda n: (mean.get(n.pk) is None, -(mean.get(n.pk) or 0)))
        chosen = ranked[: expansion.keep]
    context = Context.from_record(expansion.context)
    try:
        with transaction.atomic():
            for child in chosen:
                body = gen.request_for(child.full_text(), context, expansion.body)
                _send(g.owner, expansion, child, body, level=level)
    except (BudgetRefused, ParamsInvalid, BackendError) as exc:
        reason = exc.message if isinstance(exc, BudgetRefused) else str(exc)
        _stop(expansion, Expansion.State.STOPPED, f"Stopped before level {level + 1}: {reason}")


def _count(expansion: Expansion, **by: int) -> None:
    Expansion.objects.filter(pk=expansion.pk).update(**{k: F(k) + v for k, v in by.items()})
    expansion.refresh_from_db()


def _stop(expansion: Expansion, state: str, message: str) -> None:
    """End a running expansion; nothing more is sent, so what is left of its hold is
    released (its generations in flight keep their own reservations)."""
    Expansion.objects.filter(pk=expansion.pk, state=Expansion.State.RUNNING).update(
        state=state, message=message[:2000], finished_at=timezone.now()
    )
    budget.close_hold(hold_name(expansion.pk))
    expansion.refresh_from_db()


@receiver(pre_delete, sender=Expansion, dispatch_uid="loom.expansion.close_hold")
def _close_hold_on_delete(sender: Any, instance: Expansion, **kwargs: Any) -> None:
    # Deleted with its tree (or by the admin) while it ran: its hold goes with it.
    budget.close_hold(hold_name(instance.pk))


def cancel(expansion: Expansion) -> int:
    """Stop sending; the generations queued or running are cancelled (what a running
    one has made by then is kept, as a Loom generation's is). Returns how many."""
    with transaction.atomic():
        row = Expansion.objects.select_for_update().get(pk=expansion.pk)
        if row.is_running:
            _stop(row, Expansion.State.CANCELLED, "Cancelled: what had finished stays.")
    live = Generation.objects.filter(
        kind=gen.KIND, state__in=Generation.ACTIVE, target__expansion=expansion.pk,
    )  # fmt: skip
    count = 0
    for g in live:
        lifecycle.cancel(g)
        count += 1
    expansion.refresh_from_db()
    return count


def settle_if_done(expansion: Expansion) -> Expansion:
    """Catch up with what a lost signal left behind (a worker restart): finished
    generations not attached yet are attached now (and their next level started); a
    running expansion with nothing left in flight is done."""
    mine = Generation.objects.filter(kind=gen.KIND, target__expansion=expansion.pk)
    waiting = mine.filter(state__in=Generation.TERMINAL, claimed_at__isnull=True)
    for g in waiting.exclude(target__detached=True)[:50]:
        gen.materialize(g)
    expansion.refresh_from_db()
    live = mine.filter(state__in=Generation.ACTIVE).exists()
    if expansion.is_running and not live and expansion.finished >= expansion.started:
        _stop(expansion, Expansion.State.DONE, "")
    return expansion
