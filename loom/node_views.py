"""Changing nodes: the reader's actions on a node (one small function each, looked up
in ACTIONS), writing in the document, and undo and redo. Every view loads the tree
through loom.access.tree_for(); a change based on an older version of a node is
offered back (Stale), never applied over it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from completions.budget import BudgetRefused
from completions.errors import BackendError
from completions.schema import ParamsInvalid
from core.tokens import text_before
from loom import generation as gen
from loom.access import tree_for
from loom.forms import TagForm, TextForm
from loom.generation_views import save_context
from loom.models import LoomError, Node, Rating, Stale, Tree, WriteMode
from loom.reader_views import show_after, show_notice, show_reader, show_stale
from loom.shortcuts import INVALID, cleaned, node_or_none, node_url, owned_node, whole_number
from loom.undo import redo_last, undo_last

# What an action shows next: the node (None: the one acted on) and what the reader's
# notice says about it (`notice`, and `notice_generate` for a Continue button).
Shown = tuple[Node | None, dict[str, Any]]
NOTHING: dict[str, Any] = {}


def _edit(request, tree: Tree, node: Node) -> Shown:
    post = request.POST
    text = cleaned(TextForm, post)["text"]
    made = node.edit(
        text, as_sibling=bool(post.get("as_sibling")), by=request.user, based_on=_version(post)
    )
    return made, NOTHING


def _child(request, tree: Tree, node: Node) -> Shown:
    return node.add_child(cleaned(TextForm, request.POST)["text"], written_by=request.user), NOTHING


def _split(request, tree: Tree, node: Node) -> Shown:
    post = request.POST
    offset = whole_number(post.get("offset"), "offset")
    tail = node.split(offset, based_on=_version(post))
    below = _focus_below(tree, node, post.get("focus"))
    # Below the split node the path reads the same; on it, the text after the
    # caret would vanish from the reader: show the new child that holds it.
    focus = below if below is not None and below.pk != node.pk else tail
    where = ", shown here" if focus.pk == tail.pk else ""
    notice = (
        f"Split node {node.pk} at character {offset}: the text after the caret "
        f"is now its child, node {tail.pk}{where}."
    )
    return focus, {"notice": notice}


def _merge(request, tree: Tree, node: Node) -> Shown:
    return node.merge_into_parent(based_on=_version(request.POST)), NOTHING


def _move(request, tree: Tree, node: Node) -> Shown:
    target_id = whole_number(request.POST.get("target"), "target")
    target = Node.objects.filter(pk=target_id, tree=tree).first()
    if target is None:
        raise LoomError("There is no node with that number in this tree.")
    node.move_to(target)
    return None, NOTHING


def _delete(request, tree: Tree, node: Node) -> Shown:
    parent = node.parent
    node.delete_subtree()
    return parent, NOTHING


def _bookmark(request, tree: Tree, node: Node) -> Shown:
    node.toggle_bookmark()
    return None, NOTHING


def _archive(request, tree: Tree, node: Node) -> Shown:
    node.toggle_archive()
    return None, NOTHING


def _rate(request, tree: Tree, node: Node) -> Shown:
    # up / down toggle (pressed again, the rating is cleared); "none" clears it.
    wanted = {"up": Rating.UP, "down": Rating.DOWN, "none": None}.get(
        request.POST.get("value", ""), 0
    )
    if wanted == 0:
        raise LoomError("Rate a node up, down or none.")
    node.rate(None if wanted == node.rating else wanted)
    return None, NOTHING


def _tag(request, tree: Tree, node: Node) -> Shown:
    node.add_tag(cleaned(TagForm, request.POST)["tag"])
    return None, NOTHING


def _untag(request, tree: Tree, node: Node) -> Shown:
    node.remove_tag(cleaned(TagForm, request.POST)["tag"])
    return None, NOTHING


def _pick_alternative(request, tree: Tree, node: Node) -> Shown:
    made = _alternative(node, request.POST, request.user)
    notice = f"Node {made.pk} ends with the alternative you picked; it has no continuation yet."
    return made, {"notice": notice, "notice_generate": True}


def _expand(request, tree: Tree, node: Node) -> Shown:
    made = node.expand_alternatives(whole_number(request.POST.get("index"), "index"))
    return node_or_none(tree, made[0].parent_id), NOTHING


def _hoist(request, tree: Tree, node: Node) -> Shown:
    tree.hoist(None if tree.hoisted_id == node.pk else node)
    return None, NOTHING


def _unhoist(request, tree: Tree, node: Node) -> Shown:
    tree.hoist(None)
    return None, NOTHING


# The reader's actions on a node, by the last part of their address
# (/loom/<tree>/n/<node>/<action>/): each changes the node through its model method.
ACTIONS: dict[str, Callable[[Any, Tree, Node], Shown]] = {
    "edit": _edit,
    "child": _child,
    "split": _split,
    "merge": _merge,
    "move": _move,
    "delete": _delete,
    "bookmark": _bookmark,
    "archive": _archive,
    "rate": _rate,
    "tag": _tag,
    "untag": _untag,
    "alternative": _pick_alternative,
    "expand": _expand,
    "hoist": _hoist,
    "unhoist": _unhoist,
}


@require_POST
def node_action(request, tree_id: int, node_id: int, action: str):
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    act = ACTIONS.get(action)
    if act is None:
        raise Http404("unknown action")
    try:
        focus, notice = act(request, tree, node)
    except Stale as exc:
        return show_stale(request, tree, exc)
    except LoomError as exc:
        node.refresh_from_db()
        return show_after(request, tree, node, error=str(exc))
    return show_after(request, tree, focus or node, **notice)


def _version(post) -> int | None:
    """The version of the node the page's edit, split or merge was based on (None
    when the form did not say: nothing is checked then)."""
    value = post.get("version")
    return None if value in (None, "") else whole_number(value, "version")


def _focus_below(tree: Tree, node: Node, value) -> Node | None:
    """The node to show after splitting `node` from the document: the reader's own
    node when it is below the split one (the path stays the same text)."""
    if not value:
        return None
    focus = Node.objects.filter(pk=whole_number(value, "focus"), tree=tree).first()
    if focus is None or not Node.objects.is_ancestor(node, focus):
        raise LoomError("The node to show is not below the one split.")
    return focus


def _alternative(node: Node, post, user) -> Node:
    """A sibling whose text is this node's tokens up to position i, then the
    chosen alternative token: ready to generate from (made by `user`, who chose it)."""
    lp = node.logprobs or {}
    i = whole_number(post.get("index"), "index")
    token = post.get("token", "")
    tops = lp.get("top_logprobs") or []
    # The text before token i as the token view aligned it (whole characters, not
    # the "�" pieces of byte-level tokens).
    before = text_before(node.text, lp, i)
    if before is None or i >= len(tops) or token not in (tops[i] or {}):
        raise LoomError("That alternative is not one of this token's alternatives.")
    if node.parent_id is None:
        raise LoomError("The root has no siblings.")
    text = before + token
    parent = Node.objects.get(pk=node.parent_id)
    # The same model label as the node it branched from (params' short id): one model,
    # one name and one colour, not the checkpoint beside the short id.
    return parent.add_child(
        text,
        author=node.author,
        checkpoint=node.checkpoint,
        request_id=node.request_id,
        params=node.params,
        prompt_context=node.prompt_context,
        written_by=user,
    )


@require_POST
def undo(request, tree_id: int):
    return _replay(request, tree_id, undo_last, "Undid", "Nothing to undo.")


@require_POST
def redo(request, tree_id: int):
    return _replay(request, tree_id, redo_last, "Redid", "Nothing to redo.")


def _replay(request, tree_id: int, step, verb: str, nothing: str):
    tree = tree_for(request, tree_id, "edit")
    error = ""
    try:
        done = step(tree, request.user)
    except LoomError as exc:
        done, error = None, str(exc)
    tree.refresh_from_db()
    focus_id = done[1] if done else None
    node = node_or_none(tree, focus_id) or node_or_none(tree, tree.current_id) or tree.root
    notice = f"{verb}: {done[0]}." if done else nothing
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.info(request, notice)
        return redirect(node_url(node, tree))
    Tree.objects.filter(pk=tree.pk).update(current=node)
    if error:
        return show_reader(request, tree, node, status=INVALID, error=error)
    return show_reader(request, tree, node, notice=notice)


MAX_EDITS = 50


def _edits(tree: Tree, node: Node, raw: str) -> list[tuple[Node, str, int | None]]:
    """The document's changed segments: [{"node": id, "text": …, "version": …}], each
    a node on the path to `node` (what the document shows), at the version shown."""
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except ValueError:
        raise LoomError("The edits could not be read; reload the page.") from None
    if not isinstance(items, list) or len(items) > MAX_EDITS:
        raise LoomError(f"Send at most {MAX_EDITS} changed segments at once.")
    out: list[tuple[Node, str, int | None]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise LoomError("The edits could not be read; reload the page.")
        target = Node.objects.filter(pk=whole_number(item.get("node"), "node"), tree=tree).first()
        if target is None or not Node.objects.is_ancestor(target, node):
            raise LoomError("An edited segment is not on this path any more; reload the page.")
        if any(t.pk == target.pk for t, _, _ in out):
            raise LoomError("A segment was sent twice; reload the page.")
        version = item.get("version")
        if version is not None and not isinstance(version, int):
            raise LoomError("The edits could not be read; reload the page.")
        out.append((target, cleaned(TextForm, {"text": item["text"]})["text"], version))
    return out


@require_POST
def write(request, tree_id: int, node_id: int):
    """Writing in the document: changed segments edit their nodes (or make edited
    siblings: the tree's write mode), text typed after the end becomes a human child,
    and with `generate` the result is generated from — all or nothing, so a refused
    generation leaves the typed text in the page to try again."""
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    post = request.POST
    try:
        edits = _edits(tree, node, post.get("edits", ""))
        append = cleaned(TextForm, {"text": post.get("append", "")})["text"]
        sibling = tree.write_mode == WriteMode.SIBLING
        if sibling and len(edits) + bool(append) > 1:
            raise LoomError(
                "Edited siblings are made one at a time: change one segment, or write "
                "after the end, then save."
            )
        bodies = gen.params_for_models(tree, post) if post.get("generate") else []
        if not (edits or append or bodies):
            raise LoomError("Nothing changed in the text.")
        with transaction.atomic():
            focus = node
            with tree.batch("write in the text"):
                for target, text, version in edits:
                    made = target.edit(text, as_sibling=sibling, by=request.user, based_on=version)
                    focus = made if sibling else focus
                if append:
                    focus = focus.add_child(append, written_by=request.user)
            if bodies:
                save_context(tree, post)
                gen.start_many(request.user, tree, focus, bodies)
    except gen.FormInvalid as exc:
        return show_notice(request, tree, error="Nothing was saved or sent.", errors=exc.errors)
    except ParamsInvalid as exc:
        errors = [f"{e.field}: {e.message}" for e in exc.errors]
        return show_notice(request, tree, error="Nothing was saved or sent.", errors=errors)
    except Stale as exc:
        return show_stale(request, tree, exc)
    except (LoomError, BudgetRefused, BackendError) as exc:
        message = exc.message if isinstance(exc, BudgetRefused) else str(exc)
        return show_notice(request, tree, error=f"Nothing was saved or sent: {message}")
    focus.mark_visited()
    return show_after(request, tree, focus)
