"""Loom pages. Every view loads the tree through loom.access.tree_for(), the one door
for roles: a stranger's request is a 404, a viewer's change a 403 (nothing changes)."""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.core.cache import cache
from django.core.handlers.asgi import ASGIRequest
from django.db import transaction
from django.http import Http404, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from completions.budget import BudgetRefused
from completions.client import count_tokens, list_models
from completions.errors import BackendError
from completions.forms import lookup_model
from completions.models import Generation
from completions.schema import ParamsInvalid
from core.shortcuts import int_or_404
from core.tokens import text_before
from loom import access, tree_views
from loom import expansion as growing
from loom import generation as gen
from loom import search as finding
from loom.access import tree_for
from loom.context import Context
from loom.formats import exporters, importers
from loom.formats.importers import ImportRefused, import_file
from loom.forms import (
    ChildOrderForm,
    ContextForm,
    ExpandForm,
    ExportForm,
    NewTreeForm,
    SearchForm,
    TagForm,
    TextForm,
    TitleForm,
    WriteModeForm,
    first_error,
)
from loom.models import Expansion, LoomError, Node, Rating, Stale, Tree, WriteMode
from loom.reading import (
    hoisted_path,
    live_generations,
    path_context,
    prose_html,
    reader_context,
)
from loom.undo import redo_last, undo_last
from workbench import code as wb_code

# Refusals render a fragment that says why; loom pages tell htmx to swap 422s
# (its default leaves 4xx responses unswapped, so the message would never show).
INVALID = 422


def owned_node(tree: Tree, node_id: int) -> Node:
    # With its writer: the reader shows the name (one join rather than a second query).
    return get_object_or_404(Node.objects.select_related("written_by"), pk=node_id, tree=tree)


def node_url(node: Node | int, tree: Tree) -> str:
    node_id = node.pk if isinstance(node, Node) else node
    return reverse("loom:node", args=[tree.pk, node_id])


# --- trees page -------------------------------------------------------------------------


def trees(request):
    if request.method == "POST":
        form = NewTreeForm(request.POST)
        if not form.is_valid():
            messages.error(request, first_error(form))
            return redirect("loom:trees")
        tree = Tree.objects.create_from_prompt(
            request.user, form.cleaned_data["prompt"], title=form.cleaned_data["title"]
        )
        return redirect(node_url(tree.current_id, tree))
    search = SearchForm(request.GET)
    q = search.cleaned_data["q"].strip() if search.is_valid() else ""
    whole = search.is_valid() and search.cleaned_data["whole"]
    hits = []
    if q:
        rows = (
            finding.search(
                Node.objects.filter(tree__in=access.visible_trees(request.user).values("id")),
                q,
                whole=whole,
            )
            .select_related("tree")
            .only("id", "tags", "tree__id", "tree__title")
            .order_by("-tree__updated_at", "id")[: finding.LIMIT]
        )
        hits = finding.hits(rows, q, whole=whole)
    trees = list(Tree.objects.for_user(request.user))
    shared = access.shared_with(request.user)
    stats = tree_views.tree_stats([t.pk for t in trees + shared])
    ctx = {
        "trees": [(t, stats.get(t.pk)) for t in trees],
        "shared": [(t, stats.get(t.pk)) for t in shared],
        "q": q,
        "whole": whole,
        "hits": hits,
        "formats": exporters.FORMATS,
        "search_error": "" if search.is_valid() else first_error(search),
        "max_import_mb": importers.MAX_IMPORT_BYTES // (1024 * 1024),
    }
    if request.htmx and (q or ctx["search_error"]):
        return render(request, "loom/trees.html#search-results", ctx)
    return render(request, "loom/trees.html", ctx)


@require_POST
def tree_rename(request, tree_id: int):
    tree = tree_for(request, tree_id, "edit")
    form = TitleForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not renamed: {first_error(form)}")
        return redirect("loom:trees")
    tree.title = form.cleaned_data["title"]
    tree.save(update_fields=["title", "updated_at"])
    return redirect("loom:trees")


@require_POST
def tree_duplicate(request, tree_id: int):
    # An editor's copy is theirs (as "Make a copy" in a shared document).
    copy = tree_for(request, tree_id, "edit").duplicate(owner=request.user)
    messages.success(request, f"Duplicated as “{copy.title}”.")
    return redirect("loom:trees")


@require_POST
def tree_delete(request, tree_id: int):
    tree = tree_for(request, tree_id, "own")
    tree.delete()
    messages.success(request, f"Deleted “{tree.title}”.")
    return redirect("loom:trees")


@require_POST
def tree_import(request):
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a file to import.")
        return redirect("loom:trees")
    # Checked before parsing (the body-size cap of the server comes earlier still).
    if upload.size > importers.MAX_IMPORT_BYTES:
        messages.error(
            request,
            f"Import refused: the file is {upload.size:,} bytes; "
            f"the limit is {importers.MAX_IMPORT_BYTES:,}.",
        )
        return redirect("loom:trees")
    try:
        # Parsed from the upload as it is read: never the whole file as one object.
        made = import_file(request.user, upload, filename=upload.name)
    except ImportRefused as exc:
        messages.error(request, f"Import refused: {exc}")
        return redirect("loom:trees")
    messages.success(
        request, f"Imported {', '.join('“' + t.title + '”' for t in made)} ({upload.name})."
    )
    return redirect(node_url(made[0].current_id, made[0]))


# --- the tree page ------------------------------------------------------------------------


@require_GET
def tree_open(request, tree_id: int):
    tree = tree_for(request, tree_id, "view")
    return redirect(node_url(tree.current_id or tree.root.pk, tree))


SHOW_ARCHIVED = "loom_show_archived"


def _models() -> list:
    """Every routed model for the settings picker; [] (a free-text field) when the
    backends cannot be reached — the tree stays readable."""
    try:
        return list_models()
    except BackendError:
        return []


def _reader(request, tree: Tree, node: Node, status: int = 200, **extra):
    ctx = reader_context(
        tree, node, show_archived=request.session.get(SHOW_ARCHIVED, False), user=request.user
    )
    ctx.update(tree_views.outline_context(tree, node, show_archived=ctx["show_archived"]))
    ctx["models"] = _models()
    ctx["model_ids"] = [m.id for m in ctx["models"]]
    ctx.update(extra)
    template = "loom/tree.html#reader" if request.htmx else "loom/tree.html"
    # No HX-Push-Url: static/weft/loom.js keeps the address itself (a move pushes one
    # history entry at once; any other swap replaces the address with the node shown).
    return render(request, template, ctx, status=status)


@require_GET
def node_page(request, tree_id: int, node_id: int):
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    # A viewer walks without changing the tree: the current node and the unread marks
    # are the tree's own, which its owner and editors share.
    if access.can_edit(request.tree_role):
        if tree.current_id != node.pk:
            Tree.objects.filter(pk=tree.pk).update(current=node)
            tree.current_id = node.pk
        node.mark_visited()
    return _reader(request, tree, node)


@require_GET
def read(request, tree_id: int, node_id: int):
    """Read mode: the current path as prose, full width, no controls, printable."""
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    segments, _hoisted = hoisted_path(tree, node, Node.objects.path_to(node))
    prose, models = prose_html(segments, tree)
    ctx = {
        "tree": tree,
        "node": node,
        "prose": prose,
        "models": models,
        "formats": exporters.FORMATS,
    }
    return render(request, "loom/read.html", ctx)


@require_GET
def node_path(request, tree_id: int, node_id: int):
    """The whole path text, for a node deeper than the reading view's window."""
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    ctx = {"tree": tree, "node": node, "truncated": False}
    segments, _hoisted = hoisted_path(tree, node, Node.objects.path_to(node))
    ctx.update(path_context(segments, tree))
    return render(request, "loom/tree.html#path", ctx)


LIVE_CACHE_SECONDS = 30


@require_GET
def node_live(request, tree_id: int, node_id: int):
    """What someone else's change alters on a page showing `node` (the path, the
    children, the outlines, the node's line and edit form), out of band. Rendered once
    per change of the tree and shared by every page on the node: it holds nothing that
    depends on who reads it, and ten pages re-reading the whole reader would queue
    behind each other in the server's one thread for sync views."""
    tree = tree_for(request, tree_id)
    node = owned_node(tree, node_id)
    show = bool(request.session.get(SHOW_ARCHIVED, False))
    stamp = tree.updated_at.timestamp()
    return HttpResponse(live_parts(tree, node.pk, show, stamp, request.tree_role))


def live_key(tree_id: int, node_id: int, show_archived: bool, stamp: float, role: str) -> str:
    return f"loom-live:{tree_id}:{stamp}:{node_id}:{int(show_archived)}:{role}"


def live_parts(tree: Tree | int, node_id: int, show_archived: bool, stamp: float, role: str) -> str:
    """node_live's fragment for the tree as it was at `stamp` (its updated_at), from
    the cache or rendered and kept there; "" when the node is gone. The tree's socket
    (loom/consumers.py) sends it to every page on the node with the event itself."""
    tree_id = tree.pk if isinstance(tree, Tree) else tree
    key = live_key(tree_id, node_id, show_archived, stamp, role)
    html = cache.get(key)
    if html is None:
        if not isinstance(tree, Tree):
            tree = Tree.objects.get(pk=tree_id)
        # The controls depend on the role (a viewer's parts have none): one rendering
        # per role, shared by every page of that role on the node.
        tree.role = role
        node = Node.objects.filter(pk=node_id, tree_id=tree_id).first()
        if node is None:
            return ""
        ctx = reader_context(tree, node, show_archived=show_archived)
        ctx.update(tree_views.outline_context(tree, node, show_archived=show_archived))
        ctx["oob"] = True
        html = render_to_string("loom/tree.html#live", ctx)
        cache.set(key, html, LIVE_CACHE_SECONDS)
    return html


def _after(request, tree: Tree, node: Node, error: str = "", **notice):
    """Show `node` after an operation: the reader fragment for htmx, else a redirect.
    `notice` (and `notice_generate`, a Continue button) say what the operation did."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif notice.get("notice"):
            messages.info(request, notice["notice"])
        return redirect(node_url(node, tree))
    if access.can_edit(request.tree_role):
        Tree.objects.filter(pk=tree.pk).update(current=node)
    status = INVALID if error else 200
    return _reader(request, tree, node, status=status, error=error, **notice)


@require_POST
def node_action(request, tree_id: int, node_id: int, action: str):
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    post = request.POST
    focus = node
    notice: dict = {}
    try:
        if action == "edit":
            focus = node.edit(
                _valid(TextForm, post)["text"],
                as_sibling=bool(post.get("as_sibling")),
                by=request.user,
                based_on=_version(post),
            )
        elif action == "child":
            focus = node.add_child(_valid(TextForm, post)["text"], written_by=request.user)
        elif action == "split":
            offset = _int(post.get("offset"), "offset")
            tail = node.split(offset, based_on=_version(post))
            below = _focus_below(tree, node, post.get("focus"))
            # Below the split node the path reads the same; on it, the text after the
            # caret would vanish from the reader: show the new child that holds it.
            focus = below if below is not None and below.pk != node.pk else tail
            where = ", shown here" if focus.pk == tail.pk else ""
            notice["notice"] = (
                f"Split node {node.pk} at character {offset}: the text after the caret "
                f"is now its child, node {tail.pk}{where}."
            )
        elif action == "merge":
            focus = node.merge_into_parent(based_on=_version(post))
        elif action == "move":
            target = Node.objects.filter(pk=_int(post.get("target"), "target"), tree=tree).first()
            if target is None:
                raise LoomError("There is no node with that number in this tree.")
            node.move_to(target)
        elif action == "delete":
            parent = node.parent
            node.delete_subtree()
            focus = parent
        elif action == "bookmark":
            node.toggle_bookmark()
        elif action == "archive":
            node.toggle_archive()
        elif action == "rate":
            # up / down toggle (pressed again, the rating is cleared); "none" clears it.
            wanted = {"up": Rating.UP, "down": Rating.DOWN, "none": None}.get(
                post.get("value", ""), 0
            )
            if wanted == 0:
                raise LoomError("Rate a node up, down or none.")
            node.rate(None if wanted == node.rating else wanted)
        elif action == "tag":
            node.add_tag(_valid(TagForm, post)["tag"])
        elif action == "untag":
            node.remove_tag(_valid(TagForm, post)["tag"])
        elif action == "alternative":
            focus = _alternative(node, post, request.user)
            notice["notice"] = (
                f"Node {focus.pk} ends with the alternative you picked; it has no continuation yet."
            )
            notice["notice_generate"] = True
        elif action == "expand":
            made = node.expand_alternatives(_int(post.get("index"), "index"))
            focus = Node.objects.get(pk=made[0].parent_id)
        elif action == "hoist":
            tree.hoist(None if tree.hoisted_id == node.pk else node)
        elif action == "unhoist":
            tree.hoist(None)
        else:
            raise Http404("unknown action")
    except Stale as exc:
        return _stale(request, tree, exc)
    except LoomError as exc:
        node.refresh_from_db()
        return _after(request, tree, node, error=str(exc))
    return _after(request, tree, focus, **notice)


def _version(post) -> int | None:
    """The version of the node the page's edit, split or merge was based on (None
    when the form did not say: nothing is checked then)."""
    value = post.get("version")
    return None if value in (None, "") else _int(value, "version")


def _stale(request, tree: Tree, exc: Stale):
    """A change based on an older version of the node: not applied. The writer's
    text is shown beside the current one, with a form that keeps it as a sibling or
    applies it over the current version; the reader (what they typed) stays as it is."""
    ctx = {"tree": tree, "node": exc.node, "mine": exc.mine, "message": str(exc), "oob": True}
    if not request.htmx:
        messages.error(request, str(exc))
        return redirect(node_url(exc.node, tree))
    response = render(request, "loom/tree.html#conflict", ctx, status=INVALID)
    response["HX-Reswap"] = "none"
    return response


def _focus_below(tree: Tree, node: Node, value) -> Node | None:
    """The node to show after splitting `node` from the document: the reader's own
    node when it is below the split one (the path stays the same text)."""
    if not value:
        return None
    focus = Node.objects.filter(pk=_int(value, "focus"), tree=tree).first()
    if focus is None or not Node.objects.is_ancestor(node, focus):
        raise LoomError("The node to show is not below the one split.")
    return focus


def _valid(form_class, data) -> dict:
    form = form_class(data)
    if not form.is_valid():
        raise LoomError(first_error(form))
    return form.cleaned_data


def _int(value, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise LoomError(f"{name} must be a whole number.") from None


def _alternative(node: Node, post, user) -> Node:
    """A sibling whose text is this node's tokens up to position i, then the
    chosen alternative token: ready to generate from (made by `user`, who chose it)."""
    lp = node.logprobs or {}
    i = _int(post.get("index"), "index")
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
    node = (
        Node.objects.filter(pk=focus_id, tree=tree).first()
        or Node.objects.filter(pk=tree.current_id, tree=tree).first()
        or tree.root
    )
    notice = f"{verb}: {done[0]}." if done else nothing
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.info(request, notice)
        return redirect(node_url(node, tree))
    Tree.objects.filter(pk=tree.pk).update(current=node)
    if error:
        return _reader(request, tree, node, status=INVALID, error=error)
    return _reader(request, tree, node, notice=notice)


@require_POST
def write_mode(request, tree_id: int):
    """What typing inside a segment does: change the node, or make an edited sibling."""
    tree = tree_for(request, tree_id, "edit")
    form = WriteModeForm(request.POST)
    if not form.is_valid():
        return _notice(request, tree, error=f"Not changed: {first_error(form)}")
    tree.write_mode = form.cleaned_data["mode"]
    tree.save(update_fields=["write_mode", "updated_at"])
    label = WriteMode(tree.write_mode).label
    if not request.htmx:
        messages.success(request, f"Typing inside a segment will {label}.")
        return redirect(node_url(tree.current_id or tree.root.pk, tree))
    return _notice(request, tree, notice=f"Typing inside a segment will {label}.")


def _notice(request, tree: Tree, *, error: str = "", notice: str = "", errors=()):
    """Only a notice (the reader stays as it is, with what the user typed)."""
    if not request.htmx:
        for message in [error, *errors] if error or errors else []:
            messages.error(request, message)
        if notice:
            messages.info(request, notice)
        return redirect(node_url(tree.current_id or tree.root.pk, tree))
    ctx = {"tree": tree, "error": error, "errors": errors, "notice": notice, "oob": True}
    response = render(request, "loom/tree.html#notices", ctx, status=INVALID if error else 200)
    response["HX-Reswap"] = "none"
    return response


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
        target = Node.objects.filter(pk=_int(item.get("node"), "node"), tree=tree).first()
        if target is None or not Node.objects.is_ancestor(target, node):
            raise LoomError("An edited segment is not on this path any more; reload the page.")
        if any(t.pk == target.pk for t, _, _ in out):
            raise LoomError("A segment was sent twice; reload the page.")
        version = item.get("version")
        if version is not None and not isinstance(version, int):
            raise LoomError("The edits could not be read; reload the page.")
        out.append((target, _valid(TextForm, {"text": item["text"]})["text"], version))
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
        append = _valid(TextForm, {"text": post.get("append", "")})["text"]
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
                _save_context(tree, post)
                gen.start_many(request.user, tree, focus, bodies)
    except gen.FormInvalid as exc:
        return _notice(request, tree, error="Nothing was saved or sent.", errors=exc.errors)
    except ParamsInvalid as exc:
        errors = [f"{e.field}: {e.message}" for e in exc.errors]
        return _notice(request, tree, error="Nothing was saved or sent.", errors=errors)
    except Stale as exc:
        return _stale(request, tree, exc)
    except (LoomError, BudgetRefused, BackendError) as exc:
        message = exc.message if isinstance(exc, BudgetRefused) else str(exc)
        return _notice(request, tree, error=f"Nothing was saved or sent: {message}")
    focus.mark_visited()
    return _after(request, tree, focus)


@require_GET
def bookmark_step(request, tree_id: int, node_id: int, direction: str):
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    if direction not in ("next", "prev"):
        raise Http404("unknown direction")
    target_id = Node.objects.bookmark_step(tree, node, direction)
    if target_id is None:
        return _after(request, tree, node, error="This tree has no bookmarks.")
    return _after(request, tree, owned_node(tree, target_id))


CONTEXT_FIELDS = ("memory", "note", "note_depth", "note_unit")


def _posted_context(tree: Tree, post) -> Context:
    """The memory and author's note as the page holds them when it sent them (the
    generate form includes them: a change saved on its own might not have landed yet
    when Generate is pressed), else the tree's. Raises LoomError when not valid."""
    if "memory" not in post:
        return Context.of(tree)
    data = _valid(ContextForm, post)
    return Context(data["memory"], data["note"], data["note_depth"], data["note_unit"])


def _save_context(tree: Tree, post) -> None:
    """Keep the posted memory and note on the tree (inside the caller's transaction:
    a refused generation keeps nothing)."""
    context = _posted_context(tree, post)
    values = dict(zip(CONTEXT_FIELDS, (context.memory, context.note, context.depth,
                                       context.unit), strict=True))  # fmt: skip
    if any(getattr(tree, name) != value for name, value in values.items()):
        for name, value in values.items():
            setattr(tree, name, value)
        tree.save(update_fields=[*CONTEXT_FIELDS, "updated_at"])


@require_POST
def tree_context(request, tree_id: int):
    """Save the tree's memory and author's note (the page saves them as they change)."""
    tree = tree_for(request, tree_id, "edit")
    try:
        _save_context(tree, request.POST)
    except LoomError as exc:
        return _notice(request, tree, error=f"Not saved: {exc}")
    unit = "newline" if tree.note_unit == "newlines" else "token"
    where = f"{tree.note_depth} {unit}{'s' if tree.note_depth != 1 else ''} before the end"
    notice = (
        f"Saved: every generation's prompt now starts with the memory ({len(tree.memory):,} "
        f"characters) and has the author's note {where}."
        if tree.memory or tree.note
        else "Saved: no memory and no author's note."
    )
    return _notice(request, tree, notice=notice)


@require_POST
def code(request, tree_id: int, node_id: int):
    """View code: the exact request a generation from this node would send now, the
    memory and author's note in its prompt, and that prompt's token count."""
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    ctx: dict = {"tree": tree, "node": node}
    try:
        context = _posted_context(tree, request.POST)
        bodies = gen.params_for_models(tree, request.POST)
        path = node.full_text()
        body = gen.request_for(path, context, bodies[0])
        model = lookup_model(body.get("model") or "")
        body.setdefault("model", model.id if model else None)
    except gen.FormInvalid as exc:
        ctx["errors"] = exc.errors
    except LoomError as exc:
        ctx["errors"] = [str(exc)]
    except BackendError as exc:
        ctx["errors"] = [f"The backend could not place the note: {exc}"]
    else:
        api = request.build_absolute_uri("/v1")
        counts = count_tokens(body["model"], [body["prompt"], path]) if body["model"] else None
        ctx.update(
            prompt=body["prompt"],
            curl=wb_code.as_curl(body, api),
            python=wb_code.as_python(body, api),
            prompt_tokens=counts[0] if counts else None,
            path_tokens=counts[1] if counts else None,
            several=len(bodies) > 1,
            context=context,
            seed_drawn=body.get("seed") is None,
        )
    return render(request, "loom/tree.html#code", ctx, status=INVALID if "errors" in ctx else 200)


@require_POST
def child_order(request, tree_id: int, node_id: int):
    """How the reader lists children (and whether thumbs-down ones are hidden): the
    tree's own setting, remembered."""
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    form = ChildOrderForm(request.POST)
    if not form.is_valid():
        return _after(request, tree, node, error=f"Not changed: {first_error(form)}")
    tree.child_order = form.cleaned_data["order"]
    tree.hide_down = form.cleaned_data["hide_down"]
    tree.save(update_fields=["child_order", "hide_down", "updated_at"])
    return _after(request, tree, node)


@require_POST
def show_archived(request, tree_id: int, node_id: int):
    """Toggle listing archived nodes among children and siblings (kept in the session)."""
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    request.session[SHOW_ARCHIVED] = not request.session.get(SHOW_ARCHIVED, False)
    return _after(request, tree, node)


@require_GET
def tree_search(request, tree_id: int):
    tree = tree_for(request, tree_id, "view")
    search = SearchForm(request.GET)
    q = search.cleaned_data["q"].strip() if search.is_valid() else ""
    whole = search.is_valid() and search.cleaned_data["whole"]
    hits = []
    if q:
        rows = finding.search(Node.objects.filter(tree=tree), q, whole=whole)
        hits = finding.hits(rows.order_by("id")[: finding.LIMIT], q, whole=whole)
    ctx = {"tree": tree, "q": q, "hits": hits}
    if not search.is_valid():
        ctx["search_error"] = first_error(search)
    return render(request, "loom/tree.html#tree-search", ctx)


# --- export ----------------------------------------------------------------------------------


@require_GET
def export(request, tree_id: int, fmt: str):
    tree = tree_for(request, tree_id, "view")
    if fmt not in exporters.FORMATS:
        raise Http404("unknown format")
    suffix, content_type, _label = exporters.FORMATS[fmt]
    if fmt in ("txt", "md"):
        form = ExportForm(request.GET)
        if not form.is_valid():
            return HttpResponseBadRequest(
                f"Export refused: {first_error(form)}", content_type="text/plain; charset=utf-8"
            )
        node = owned_node(tree, form.cleaned_data["node"] or tree.current_id or tree.root.pk)
        chunks = exporters.path_text(node) if fmt == "txt" else exporters.path_markdown(tree, node)
    else:
        chunks = exporters.TREE_EXPORTERS[fmt](tree)
    if isinstance(request, ASGIRequest):
        # Under ASGI a sync iterator would be read whole into a list before
        # sending; pull it chunk by chunk in the request's DB thread instead.
        chunks = _aiter(chunks)
    response = StreamingHttpResponse(chunks, content_type=content_type)
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in tree.title)[:60] or "tree"
    response["Content-Disposition"] = f'attachment; filename="{name}.{suffix}"'
    return response


async def _aiter(chunks):
    done = object()
    pull = sync_to_async(lambda: next(chunks, done), thread_sensitive=True)
    buffer: list[str] = []
    size = 0
    while (chunk := await pull()) is not done:
        buffer.append(chunk)
        size += len(chunk)
        if size >= 64 * 1024:  # fewer, larger writes
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)


# --- generation -----------------------------------------------------------------------------------


@require_POST
def generate(request, tree_id: int, node_id: int):
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    ctx = {"tree": tree, "node": node}
    try:
        bodies = gen.params_for_models(tree, request.POST)
        with transaction.atomic():  # a refusal keeps neither the defaults nor the memory
            _save_context(tree, request.POST)
            if request.POST.get("save_defaults"):
                tree.settings = {k: v for k, v in bodies[0].items() if k != "prompt"}
                tree.save(update_fields=["settings", "updated_at"])
            generations = gen.start_many(request.user, tree, node, bodies)
    except gen.FormInvalid as exc:
        ctx["errors"] = [m for f, m in exc.field_errors if f not in gen.FORM_SLOTS]
        ctx["field_errors"] = gen.error_slots(exc)
    except LoomError as exc:
        ctx["errors"] = [str(exc)]
    except ParamsInvalid as exc:
        ctx["errors"] = [f"{e.field}: {e.message}" for e in exc.errors]
    except BudgetRefused as exc:
        ctx["errors"] = [exc.message]
        if not Context.of(tree).empty:
            ctx["errors"].append("That counts the prompt with the memory and author's note.")
    except BackendError as exc:
        ctx["errors"] = [f"The backend refused: {exc}"]
    else:
        ctx["live"] = live_generations(tree, generations)
        return render(request, "loom/tree.html#generation", ctx)
    # A refusal (a second g while one runs, bad settings, no budget) goes to the notice
    # area and beside the fields; the live area keeps the generations it shows (replacing
    # it would close their socket, and their children would never appear on the page).
    ctx["error"] = "Nothing was sent." + (
        " See the marked settings." if ctx.get("field_errors") else ""
    )
    response = render(request, "loom/tree.html#generation-refused", ctx, status=INVALID)
    response["HX-Reswap"] = "none"
    return response


@require_POST
def grow(request, tree_id: int, node_id: int):
    """Expand the node automatically (depth × breadth, as bulk work), after checking
    the whole expansion's worst case against the budget; refused whole otherwise."""
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    try:
        size = _valid(ExpandForm, request.POST)
        with transaction.atomic():  # the memory saved only if the expansion starts
            _save_context(tree, request.POST)
            started = growing.start(
                request.user, tree, node, request.POST,
                depth=size["depth"], breadth=size["breadth"], keep=size["keep"],
            )  # fmt: skip
    except gen.FormInvalid as exc:
        return _notice(request, tree, error="Not expanded; nothing was sent.", errors=exc.errors)
    except ParamsInvalid as exc:
        errors = [f"{e.field}: {e.message}" for e in exc.errors]
        return _notice(request, tree, error="Not expanded; nothing was sent.", errors=errors)
    except (LoomError, BudgetRefused, BackendError) as exc:
        message = exc.message if isinstance(exc, BudgetRefused) else str(exc)
        return _notice(request, tree, error=f"Not expanded: {message}")
    keep = f", the best {started.keep} of each taken further" if started.keep else ""
    notice = (
        f"Expanding node {node.pk}: {started.depth} levels of {started.breadth} children{keep}, "
        "as bulk work; the nodes appear as they finish. Undo (z) takes the whole expansion back."
    )
    return _after(request, tree, node, notice=notice)


def _owned_expansion(tree: Tree, expansion_id: int) -> Expansion:
    return get_object_or_404(Expansion, pk=expansion_id, tree=tree)


@require_GET
def expansion(request, tree_id: int, expansion_id: int):
    """An expansion's progress (the page asks every second while it runs), with the
    children of the node being read and the whole-tree outline, which it grows."""
    tree = tree_for(request, tree_id, "view")
    shown = growing.settle_if_done(_owned_expansion(tree, expansion_id))
    node = Node.objects.filter(pk=int_or_404(request.GET.get("node", "0") or "0"), tree=tree)
    ctx: dict = {"tree": tree, "x": shown, "oob": True}
    node = node.first()
    seen = request.GET.get("seen", "")
    # The children and the outline only when nodes came since the page last asked (they
    # are re-rendered whole; the outline's focus should not be taken every second).
    if node is not None and seen != str(shown.nodes):
        ctx.update(reader_context(tree, node, children_only=True,
                                  show_archived=request.session.get(SHOW_ARCHIVED, False)))  # fmt: skip
        ctx.update(tree_views.outline_context(tree, node, show_archived=ctx["show_archived"]))
    return render(request, "loom/tree.html#expansion-progress", ctx)


@require_POST
def expansion_cancel(request, tree_id: int, expansion_id: int):
    tree = tree_for(request, tree_id, "edit")
    stopped = _owned_expansion(tree, expansion_id)
    growing.cancel(stopped)
    if not request.htmx:
        return redirect(node_url(stopped.root_id or tree.current_id or tree.root.pk, tree))
    return render(request, "loom/tree.html#expansion-progress", {"tree": tree, "x": stopped})


def render_result(request, g):
    """A finished generation's children (completions.registry's hook for the Loom's
    kind; the door's result view has let in its asker, or a member of its tree through
    loom.generation.may_watch)."""
    made = gen.materialize(g)
    g.refresh_from_db()
    parent = gen.target_node(g)
    if parent is not None and not access.can_view(access.role_for(request.user, parent.tree_id)):
        parent = None
    ctx = {"generation": g, "made": made, "parent": parent}
    if parent is not None:
        ctx.update(
            reader_context(
                parent.tree,
                parent,
                children_only=True,
                show_archived=request.session.get(SHOW_ARCHIVED, False),
            )
        )
    return render(request, "loom/tree.html#generation-result", ctx)


def recover(request):
    if request.method == "POST":
        tree = tree_for(request, int_or_404(request.POST.get("tree")), "edit")
        node_id = request.POST.get("node") or tree.current_id or tree.root.pk
        parent = owned_node(tree, int_or_404(node_id))
        generation_id = int_or_404(request.POST.get("generation"))
        g = get_object_or_404(Generation, pk=generation_id, owner=request.user, kind=gen.KIND)
        try:
            if not g.is_terminal:
                raise LoomError(
                    f"Generation {g.pk} is still {g.state}: attach it once it has finished."
                )
            made = gen.attach_to(request.user, generation_id, parent)
        except Generation.DoesNotExist:
            raise Http404("no such generation") from None
        except LoomError as exc:
            messages.error(request, f"Not attached: {exc}")
            return redirect("loom:recover")
        messages.success(request, f"Attached {len(made)} node(s) under node {parent.pk}.")
        return redirect(node_url(parent, tree))
    pending = Generation.objects.recoverable(request.user).filter(kind=gen.KIND).order_by("-id")
    return render(
        request,
        "loom/recover.html",
        {"pending": pending, "trees": access.editable_trees(request.user).only("id", "title")},
    )
