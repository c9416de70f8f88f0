"""Generation into children: build the request from the tree's settings, and
turn a finished Generation (the door's recovery checkpoint) into model-written
child nodes exactly once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from completions import lifecycle, pipeline
from completions.forms import ParamsForm, lookup_model
from completions.models import Generation
from loom import access, live
from loom.context import Context, prompt_for
from loom.models import Author, LoomError, Node, Tree

log = logging.getLogger(__name__)

KIND = "loom"
# The door's parameters the Loom's generation settings show (completions.forms parses
# and bounds them, the same fields as the Workbench's).
PARAM_FIELDS = ["n", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "logprobs"]
DEFAULTS: dict[str, Any] = {"n": 3, "max_tokens": 48, "temperature": 1.0, "logprobs": 5}


class FormInvalid(ValueError):
    """Settings the form or the door refused: (field, message) pairs, "__all__" for
    what belongs to no field."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.field_errors = errors
        self.errors = [m if f == "__all__" else f"{f}: {m}" for f, m in errors]
        super().__init__("; ".join(self.errors))


# Every slot an error can be shown in, next to its input on the settings form.
FORM_SLOTS = ["model", *PARAM_FIELDS, "stop"]


def error_slots(exc: FormInvalid) -> list[tuple[str, str]]:
    """(slot, message) for every slot, empty ones clearing an earlier error."""
    return [(slot, "; ".join(m for f, m in exc.field_errors if f == slot)) for slot in FORM_SLOTS]


def effective_settings(tree: Tree) -> dict[str, Any]:
    return {**DEFAULTS, **(tree.settings or {})}


def params_from_form(tree: Tree, form: Any) -> dict[str, Any]:
    """The tree's settings overridden by the non-empty form fields. Raises
    FormInvalid with every field's error (nothing is sent then)."""
    params = ParamsForm(
        form, names=PARAM_FIELDS, with_prompt=False, base=effective_settings(tree),
        model_info=lookup_model,
    )  # fmt: skip
    if not params.is_valid():
        raise FormInvalid(params.error_list())
    return params.request_body()


class Busy(LoomError):
    """The node already has a generation queued or running."""


ACTIVE = Generation.ACTIVE


def running_for(node: Node):
    """Loom generations still queued or running for `node`."""
    return Generation.objects.filter(kind=KIND, state__in=ACTIVE, target__parent=node.pk)


def materialize_finished(node: Node) -> None:
    """Attach the node's finished generations that no page has attached yet. The page
    normally does it when it fetches the result; but when two generations end close
    together, the reader re-read by the first can replace the second's live target
    before it fetches, and a closed browser fetches nothing. Detached ones (an undone
    attach) stay for Recover: materialize() skips them."""
    finished = Generation.objects.filter(
        kind=KIND,
        target__parent=node.pk,
        claimed_at__isnull=True,
        state__in=Generation.TERMINAL,
    ).order_by("id")
    for g in finished[:MAX_MODELS]:
        materialize(g)


def start(user, tree: Tree, node: Node, data: dict):
    return start_many(user, tree, node, [data])[0]


MAX_MODELS = 8


def start_many(user, tree: Tree, node: Node, bodies: list[dict]) -> list:
    """One generation per request body (several models at once), all or none: one
    generation per node at a time, so a second press while the first runs is refused
    (Busy) and g pressed twice never makes 2N children. The node's row lock makes the
    check and the start one step for concurrent requests. Raises the door's
    ParamsInvalid / BudgetRefused / BackendError; nothing is sent then (the
    Celery tasks are enqueued on commit, and a refusal rolls every one back)."""
    path = node.full_text()
    context = Context.of(tree)
    prepared = [request_for(path, context, data) for data in bodies]
    with transaction.atomic():
        Node.objects.select_for_update().filter(pk=node.pk).first()
        for other in running_for(node):
            lifecycle.check_alive(other)  # a dead worker's run no longer blocks the node
            if other.state in ACTIVE:
                raise Busy(
                    f"Node {node.pk} is already generating (generation {other.pk}, "
                    f"{other.state}): wait for it to finish or stop it first."
                )
        started = []
        for body in prepared:
            target = target_for(tree, node, context)
            started.append(pipeline.start(user, body, kind=KIND, target=target))
        # The tree's other pages on this node re-read it and so open the same streams.
        live.publish(tree.pk, "generating", [node.pk], generations=[g.pk for g in started])
        return started


def request_for(path: str, context: Context, data: dict) -> dict:
    """The door's request for one body: the tree's memory and author's note put around
    the path (the note placed by the body's own model's tokenizer when counted in
    tokens). Raises BackendError when that tokenizer cannot be reached."""
    body = {k: v for k, v in data.items() if v is not None}
    model = body.get("model") if isinstance(body.get("model"), str) else None
    if context.note and context.unit == "tokens" and not model:
        info = lookup_model("")
        model = info.id if info is not None else None
    body["prompt"] = prompt_for(path, context, model)
    return body


def target_for(tree: Tree, node: Node, context: Context, **more: Any) -> dict:
    """The generation's target: where its children go, and what it was sent with."""
    target: dict[str, Any] = {"tree": tree.pk, "parent": node.pk, **more}
    if (record := context.record()) is not None:
        target["context"] = record
    return target


def params_for_models(tree: Tree, form: Any) -> list[dict[str, Any]]:
    """The request bodies for the form's `models` (several ticked: one body each, N
    children per model), else the one body of its `model`. Raises FormInvalid."""
    chosen = (
        [m.strip() for m in form.getlist("models") if m.strip()] if hasattr(form, "getlist") else []
    )
    chosen = list(dict.fromkeys(chosen))
    if len(chosen) > MAX_MODELS:
        raise FormInvalid([("model", f"Pick at most {MAX_MODELS} models at once.")])
    if len(chosen) < 2:
        if chosen:
            form = form.copy()
            form["model"] = chosen[0]
        return [params_from_form(tree, form)]
    bodies = []
    for model in chosen:
        one = form.copy()
        one["model"] = model
        try:
            bodies.append(params_from_form(tree, one))
        except FormInvalid as exc:
            raise FormInvalid([(f, f"{model}: {m}") for f, m in exc.field_errors]) from None
    return bodies


def _node_fields(generation, choice: dict) -> dict[str, Any]:
    params = {k: v for k, v in (generation.params or {}).items() if k != "prompt"}
    return {
        "author": Author.MODEL,
        "checkpoint": (generation.served_model or params.get("model") or "")[:300],
        "request_id": (generation.request_id or "")[:200],
        "params": params,
        "seed": params.get("seed"),
        "finish_reason": (choice.get("finish_reason") or generation.state or "")[:20],
        "logprobs": choice.get("logprobs"),
        # The memory and note it was sent with (the params' prompt is not kept on nodes).
        "prompt_context": (generation.target or {}).get("context"),
        # Whoever asked for it wrote it (and paid for it: the run is theirs).
        "written_by_id": generation.owner_id,
    }


def attach(generation, parent: Node, *, label: str = "", log: bool = True) -> list[Node]:
    """Create one child of `parent` per choice that has text, in choice order,
    and claim the generation. Caller holds the generation row lock.

    The new nodes are one undo step of their own ("attach"): undoing it takes
    them out again and hands the generation back to Recover, so an undo never
    deletes generated text (undoing the add of their parent first would have
    cascaded to them)."""
    made = []
    for choice in sorted(generation.choices or [], key=lambda c: c.get("index", 0)):
        text = choice.get("text") or ""
        if not text:
            continue
        made.append(parent.add_child(text, log=False, **_node_fields(generation, choice)))
    generation.claim()
    if not log:  # the caller keeps the undo step (an expansion's one step)
        parent.tree.touch()
    elif made:
        count = f"{len(made)} generated node{'s' if len(made) != 1 else ''}"
        parent.tree.log(
            "attach",
            label or f"generate {count}",
            {"nodes": [n.pk for n in made], "generation": generation.pk, "focus": parent.pk},
        )
    else:
        parent.tree.touch()
    return made


def materialize(generation) -> list[Node] | None:
    """Turn a finished loom generation into children of its target node, once.
    Returns None (and leaves it unclaimed, so Recover lists it) when the target
    node is gone or it is not ready. An expansion's generation goes on to its next
    level (loom/expansion.py)."""
    if generation.kind != KIND:
        return None
    if (generation.target or {}).get("expansion"):
        if _attach_expansion is None:
            raise RuntimeError("loom.apps has not handed in loom.expansion.attach_finished")
        return _attach_expansion(generation)
    return materialize_plain(generation)


# An expansion's generation becomes nodes through loom/expansion.py's attach_finished.
# That module builds on this one (it starts and attaches through it), so this one does
# not import it back: loom/apps.py hands the function in at startup.
_attach_expansion: Callable[[Generation], list[Node] | None] | None = None


def attach_expansions_with(attach_finished: Callable[[Generation], list[Node] | None]) -> None:
    global _attach_expansion  # set once, at startup
    _attach_expansion = attach_finished


def target_node(g) -> Node | None:
    """The node a generation was asked under (its target), if it is still in its tree."""
    target = g.target or {}
    parent, tree = target.get("parent"), target.get("tree")
    if parent is None or tree is None:
        return None
    return Node.objects.filter(pk=parent, tree_id=tree).first()


def target_parent(g) -> Node | None:
    """The node a generation's children go under, while its asker may still change
    that tree (owner or editor): a generation of someone whose share was revoked or
    downgraded meanwhile is left for their Recover, not added to the tree."""
    parent = target_node(g)
    if parent is None or not access.can_edit(access.role_for(g.owner, parent.tree_id)):
        return None
    return parent


def materialize_plain(generation) -> list[Node] | None:
    with transaction.atomic():
        g = Generation.objects.select_for_update().get(pk=generation.pk)
        if g.claimed_at is not None or not g.is_terminal or (g.target or {}).get("detached"):
            return None
        if not any(c.get("text") for c in g.choices or []):
            if g.state == Generation.State.DONE:
                g.claim()  # nothing to keep
            return None
        parent = target_parent(g)
        if parent is None:
            log.info("generation %s: parent node gone, left for Recover", g.pk)
            return None
        with live.acting(g.owner_id, g.owner.get_username()):
            return attach(g, parent)


def attach_to(user, generation_id: int, parent: Node) -> list[Node]:
    """Recover: attach an unclaimed, finished generation to any node the user
    owns. A running one is refused: its partial text would be claimed and its
    final text would never become nodes."""
    with transaction.atomic():
        g = Generation.objects.select_for_update().get(
            pk=generation_id, owner=user, kind=KIND, claimed_at__isnull=True
        )
        if not g.is_terminal:
            raise LoomError(
                f"Generation {g.pk} is still {g.state}: it can be attached once it has finished."
            )
        return attach(g, parent, label=f"attach generation {g.pk}")


def may_watch(user, generation) -> bool:
    """Anyone who may read the tree a generation grows sees it stream (completions.registry)."""
    tree_id = (generation.target or {}).get("tree")
    return isinstance(tree_id, int) and access.can_view(access.role_for(user, tree_id))


def on_generation_finished(sender, generation, **kwargs) -> None:
    try:
        materialize(generation)
    except Exception:  # a failure here must not break the worker; Recover still has it
        log.exception("generation %s: could not turn into nodes", generation.pk)
