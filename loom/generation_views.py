"""Generating: from a node (one model or several), an automatic expansion and its
progress and cancel, a finished generation's children (the door's result view), the
memory and author's note they are sent with, View code, and Recover. Every view loads
the tree through loom.access.tree_for()."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from completions import code as snippets
from completions.budget import BudgetRefused
from completions.client import count_tokens
from completions.errors import BackendError
from completions.forms import lookup_model
from completions.models import Generation
from completions.schema import ParamsInvalid
from core.shortcuts import int_or_404
from loom import access, tree_views
from loom import expansion as growing
from loom import generation as gen
from loom.access import tree_for
from loom.context import Context
from loom.forms import ContextForm, ExpandForm
from loom.models import Expansion, LoomError, Node, Tree
from loom.reader_views import show_after, show_notice
from loom.reading import live_generations, reader_context
from loom.shortcuts import INVALID, SHOW_ARCHIVED, cleaned, node_url, owned_node

CONTEXT_FIELDS = ("memory", "note", "note_depth", "note_unit")


def posted_context(tree: Tree, post) -> Context:
    """The memory and author's note as the page holds them when it sent them (the
    generate form includes them: a change saved on its own might not have landed yet
    when Generate is pressed), else the tree's. Raises LoomError when not valid."""
    if "memory" not in post:
        return Context.of(tree)
    data = cleaned(ContextForm, post)
    return Context(data["memory"], data["note"], data["note_depth"], data["note_unit"])


def save_context(tree: Tree, post) -> None:
    """Keep the posted memory and note on the tree (inside the caller's transaction:
    a refused generation keeps nothing)."""
    context = posted_context(tree, post)
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
        save_context(tree, request.POST)
    except LoomError as exc:
        return show_notice(request, tree, error=f"Not saved: {exc}")
    unit = "newline" if tree.note_unit == "newlines" else "token"
    where = f"{tree.note_depth} {unit}{'s' if tree.note_depth != 1 else ''} before the end"
    notice = (
        f"Saved: every generation's prompt now starts with the memory ({len(tree.memory):,} "
        f"characters) and has the author's note {where}."
        if tree.memory or tree.note
        else "Saved: no memory and no author's note."
    )
    return show_notice(request, tree, notice=notice)


@require_POST
def code(request, tree_id: int, node_id: int):
    """View code: the exact request a generation from this node would send now, the
    memory and author's note in its prompt, and that prompt's token count."""
    tree = tree_for(request, tree_id, "view")
    node = owned_node(tree, node_id)
    ctx: dict = {"tree": tree, "node": node}
    try:
        context = posted_context(tree, request.POST)
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
            curl=snippets.as_curl(body, api),
            python=snippets.as_python(body, api),
            prompt_tokens=counts[0] if counts else None,
            path_tokens=counts[1] if counts else None,
            several=len(bodies) > 1,
            context=context,
            seed_drawn=body.get("seed") is None,
        )
    return render(request, "loom/tree.html#code", ctx, status=INVALID if "errors" in ctx else 200)


@require_POST
def generate(request, tree_id: int, node_id: int):
    tree = tree_for(request, tree_id, "edit")
    node = owned_node(tree, node_id)
    ctx: dict[str, Any] = {"tree": tree, "node": node}
    try:
        bodies = gen.params_for_models(tree, request.POST)
        with transaction.atomic():  # a refusal keeps neither the defaults nor the memory
            save_context(tree, request.POST)
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
        size = cleaned(ExpandForm, request.POST)
        with transaction.atomic():  # the memory saved only if the expansion starts
            save_context(tree, request.POST)
            started = growing.start(
                request.user, tree, node, request.POST,
                depth=size["depth"], breadth=size["breadth"], keep=size["keep"],
            )  # fmt: skip
    except gen.FormInvalid as exc:
        return show_notice(
            request, tree, error="Not expanded; nothing was sent.", errors=exc.errors
        )
    except ParamsInvalid as exc:
        errors = [f"{e.field}: {e.message}" for e in exc.errors]
        return show_notice(request, tree, error="Not expanded; nothing was sent.", errors=errors)
    except (LoomError, BudgetRefused, BackendError) as exc:
        message = exc.message if isinstance(exc, BudgetRefused) else str(exc)
        return show_notice(request, tree, error=f"Not expanded: {message}")
    keep = f", the best {started.keep} of each taken further" if started.keep else ""
    notice = (
        f"Expanding node {node.pk}: {started.depth} levels of {started.breadth} children{keep}, "
        "as bulk work; the nodes appear as they finish. Undo (z) takes the whole expansion back."
    )
    return show_after(request, tree, node, notice=notice)


def _owned_expansion(tree: Tree, expansion_id: int) -> Expansion:
    return get_object_or_404(Expansion, pk=expansion_id, tree=tree)


@require_GET
def expansion(request, tree_id: int, expansion_id: int):
    """An expansion's progress (the page asks every second while it runs), with the
    children of the node being read and the whole-tree outline, which it grows."""
    tree = tree_for(request, tree_id, "view")
    shown = growing.settle_if_done(_owned_expansion(tree, expansion_id))
    node_id = int_or_404(request.GET.get("node", "0") or "0")
    ctx: dict = {"tree": tree, "x": shown, "oob": True}
    node = Node.objects.filter(pk=node_id, tree=tree).first()
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
