"""Generation into children: build the request from the tree's settings, and
turn a finished Generation (the door's recovery checkpoint) into model-written
child nodes exactly once."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.db import transaction

from loom.models import Author, LoomError, Node, Tree

log = logging.getLogger(__name__)

KIND = "loom"
# Form fields a generation may adjust, with the type the door's strict schema wants.
PARAM_FIELDS: dict[str, type] = {
    "n": int,
    "max_tokens": int,
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "min_p": float,
    "seed": int,
    "logprobs": int,
}
_no_nul = ProhibitNullCharactersValidator()  # what every Django CharField checks
DEFAULTS: dict[str, Any] = {"n": 3, "max_tokens": 48, "temperature": 1.0, "logprobs": 5}


class FormInvalid(ValueError):
    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


def effective_settings(tree: Tree) -> dict[str, Any]:
    return {**DEFAULTS, **(tree.settings or {})}


def params_from_form(tree: Tree, form: dict) -> dict[str, Any]:
    """The tree's settings overridden by the non-empty form fields, converted
    to numbers (the door rejects numbers sent as strings). Range checks are the
    door's job (ParamsInvalid)."""
    data = effective_settings(tree)
    errors = []
    for name, kind in PARAM_FIELDS.items():
        raw = (form.get(name) or "").strip()
        if not raw:
            continue
        try:
            data[name] = kind(raw)
            if kind is float and not math.isfinite(data[name]):
                raise ValueError(raw)  # nan/inf: not JSON, not a setting
        except ValueError:
            errors.append(f"{name}: {raw!r} is not {'an integer' if kind is int else 'a number'}")
    for name in ("model", "stop"):
        try:
            _no_nul(form.get(name) or "")
        except ValidationError as exc:
            errors.append(f"{name}: {exc.messages[0]}")
    model = (form.get("model") or "").strip()
    if model:
        data["model"] = model
    stop = form.get("stop")
    if stop:
        # One stop string per line; a literal \n stands for a newline.
        data["stop"] = [s.replace("\\n", "\n") for s in stop.splitlines() if s]
    if errors:
        raise FormInvalid(errors)
    return data


class Busy(LoomError):
    """The node already has a generation queued or running."""


ACTIVE = ("queued", "running")


def running_for(node: Node):
    """Loom generations still queued or running for `node`."""
    from completions.models import Generation

    return Generation.objects.filter(kind=KIND, state__in=ACTIVE, target__parent=node.pk)


def start(user, tree: Tree, node: Node, data: dict):
    """One generation per node at a time: a second press while the first runs
    is refused (Busy), so g pressed twice never makes 2N children. The node's
    row lock makes the check and the start one step for concurrent requests.
    Raises the door's ParamsInvalid / BudgetRefused / BackendError; nothing is
    sent then."""
    from completions.models import Generation

    body = {k: v for k, v in data.items() if v is not None}
    body["prompt"] = node.full_text()
    with transaction.atomic():
        Node.objects.select_for_update().filter(pk=node.pk).first()
        for other in running_for(node):
            other.check_alive()  # a dead worker's run no longer blocks the node
            if other.state in ACTIVE:
                raise Busy(
                    f"Node {node.pk} is already generating (generation {other.pk}, "
                    f"{other.state}): wait for it to finish or stop it first."
                )
        return Generation.objects.start(
            user, body, kind=KIND, target={"tree": tree.pk, "parent": node.pk}
        )


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
    }


def attach(generation, parent: Node, *, label: str = "") -> list[Node]:
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
    if made:
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
    node is gone or it is not ready."""
    from completions.models import Generation

    if generation.kind != KIND:
        return None
    with transaction.atomic():
        g = Generation.objects.select_for_update().get(pk=generation.pk)
        if g.claimed_at is not None or not g.is_terminal or (g.target or {}).get("detached"):
            return None
        if not any(c.get("text") for c in g.choices or []):
            if g.state == Generation.State.DONE:
                g.claim()  # nothing to keep
            return None
        target = g.target or {}
        parent = Node.objects.filter(
            pk=target.get("parent"), tree_id=target.get("tree"), tree__owner_id=g.owner_id
        ).first()
        if parent is None:
            log.info("generation %s: parent node gone, left for Recover", g.pk)
            return None
        return attach(g, parent)


def attach_to(user, generation_id: int, parent: Node) -> list[Node]:
    """Recover: attach an unclaimed, finished generation to any node the user
    owns. A running one is refused: its partial text would be claimed and its
    final text would never become nodes."""
    from completions.models import Generation

    with transaction.atomic():
        g = Generation.objects.select_for_update().get(
            pk=generation_id, owner=user, kind=KIND, claimed_at__isnull=True
        )
        if not g.is_terminal:
            raise LoomError(
                f"Generation {g.pk} is still {g.state}: it can be attached once it has finished."
            )
        return attach(g, parent, label=f"attach generation {g.pk}")


def on_generation_finished(sender, generation, **kwargs) -> None:
    try:
        materialize(generation)
    except Exception:  # a failure here must not break the worker; Recover still has it
        log.exception("generation %s: could not turn into nodes", generation.pk)
