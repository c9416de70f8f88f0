"""The reader: a node's page (its path, children, siblings and outline), read mode,
the whole path, the live parts other people's changes re-render, the reader's own
settings (child order, archived, write mode), search and bookmark steps, and how
every other view shows what it did (`show_after`, `show_notice`, `show_stale`).
Every view loads the tree through loom.access.tree_for(), the one door for roles: a
stranger's request is a 404, a viewer's change a 403 (nothing changes)."""

from __future__ import annotations

from django.contrib import messages
from django.core.cache import cache
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from completions.client import list_models
from completions.errors import BackendError
from core.forms import first_error
from loom import access, tree_views
from loom import search as finding
from loom.access import tree_for
from loom.formats import exporters
from loom.forms import ChildOrderForm, SearchForm, WriteModeForm
from loom.models import Node, Stale, Tree, WriteMode
from loom.reading import hoisted_path, path_context, prose_html, reader_context
from loom.shortcuts import INVALID, SHOW_ARCHIVED, node_url, owned_node


def _models() -> list:
    """Every routed model for the settings picker; [] (a free-text field) when the
    backends cannot be reached — the tree stays readable."""
    try:
        return list_models()
    except BackendError:
        return []


def show_reader(request, tree: Tree, node: Node, status: int = 200, **extra):
    """The reader on `node`: the whole page, or its reader fragment for htmx."""
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


def show_after(request, tree: Tree, node: Node, error: str = "", **notice):
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
    return show_reader(request, tree, node, status=status, error=error, **notice)


def show_notice(request, tree: Tree, *, error: str = "", notice: str = "", errors=()):
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


def show_stale(request, tree: Tree, exc: Stale):
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
    return show_reader(request, tree, node)


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


@require_GET
def bookmark_step(request, tree_id: int, node_id: int, direction: str):
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    if direction not in ("next", "prev"):
        raise Http404("unknown direction")
    target_id = Node.objects.bookmark_step(tree, node, direction)
    if target_id is None:
        return show_after(request, tree, node, error="This tree has no bookmarks.")
    return show_after(request, tree, owned_node(tree, target_id))


@require_POST
def child_order(request, tree_id: int, node_id: int):
    """How the reader lists children (and whether thumbs-down ones are hidden): the
    tree's own setting, remembered."""
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    form = ChildOrderForm(request.POST)
    if not form.is_valid():
        return show_after(request, tree, node, error=f"Not changed: {first_error(form)}")
    tree.child_order = form.cleaned_data["order"]
    tree.hide_down = form.cleaned_data["hide_down"]
    tree.save(update_fields=["child_order", "hide_down", "updated_at"])
    return show_after(request, tree, node)


@require_POST
def show_archived(request, tree_id: int, node_id: int):
    """Toggle listing archived nodes among children and siblings (kept in the session)."""
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    request.session[SHOW_ARCHIVED] = not request.session.get(SHOW_ARCHIVED, False)
    return show_after(request, tree, node)


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


@require_POST
def write_mode(request, tree_id: int):
    """What typing inside a segment does: change the node, or make an edited sibling."""
    tree = tree_for(request, tree_id, "edit")
    form = WriteModeForm(request.POST)
    if not form.is_valid():
        return show_notice(request, tree, error=f"Not changed: {first_error(form)}")
    tree.write_mode = form.cleaned_data["mode"]
    tree.save(update_fields=["write_mode", "updated_at"])
    label = WriteMode(tree.write_mode).label
    if not request.htmx:
        messages.success(request, f"Typing inside a segment will {label}.")
        return redirect(node_url(tree.current_id or tree.root.pk, tree))
    return show_notice(request, tree, notice=f"Typing inside a segment will {label}.")
