"""What the reading view shows for one node: the path, the neighbourhood and
every model-written segment's tokens (core/tokens.py). Kept apart from the views so the benchmark can
time exactly what a page open costs."""

from __future__ import annotations

import html
from typing import Any

from django.db.models import F, Q
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Left
from django.urls import reverse
from django.utils.safestring import SafeString

from core.tokens import LEGEND, chips_for, chips_html
from loom import sql
from loom.formats import exporters
from loom.generation import PARAM_FIELDS, effective_settings, materialize_finished, running_for
from loom.models import Author, ChildOrder, Expansion, Node, Rating, Tree
from loom.undo import own_steps

PREVIEW = 200
OUTLINE_ANCESTORS = 12
NEIGHBOURS = 200  # children/siblings listed; the rest are counted
# Segments of the path shown when a node opens; the earlier text loads on request.
# Keeps opening a node O(window) however deep it is (bench/loom_tree.py).
PATH_WINDOW = 1000


# A node's mean logprob over its sampled tokens (what "best" means for ordering and
# for an expansion's pruning); NULL without token logprobs. -9999 is vLLM's -inf.
MEAN_LOGPROB_SQL = """(SELECT avg(e::float8) FROM jsonb_array_elements(
    CASE WHEN jsonb_typeof(loom_node.logprobs -> 'token_logprobs') = 'array'
    THEN loom_node.logprobs -> 'token_logprobs' ELSE '[]'::jsonb END) AS e
    WHERE jsonb_typeof(e) = 'number' AND e::float8 > -9999)"""


def _light(qs):
    return qs.annotate(
        preview=Left("text", PREVIEW),
        mean_logprob=RawSQL(MEAN_LOGPROB_SQL, []),
        writer=F("written_by__username"),
    ).only(
        "id", "parent_id", "author", "bookmarked", "archived", "visited_at", "position",
        "checkpoint", "params", "rating", "created_at",
    )  # fmt: skip


def in_tree_order(tree: Tree, qs, *, keep: int | None = None):
    """A node's children (or siblings) in the order the tree's reader lists them, the
    thumbs-down ones left out when the tree hides them (`keep`, the node being read,
    stays listed)."""
    if tree.hide_down:
        qs = qs.exclude(Q(rating=Rating.DOWN) & ~Q(pk=keep))
    order = tree.child_order
    if order == ChildOrder.RATING:
        return qs.order_by(Coalesce("rating", 0).desc(), "position", "id")
    if order == ChildOrder.LOGPROB:
        return qs.order_by(F("mean_logprob").desc(nulls_last=True), "position", "id")
    if order == ChildOrder.MODEL:
        label = Coalesce(KeyTextTransform("model", "params"), "checkpoint")
        return qs.order_by(F("author").desc(), label, "position", "id")
    if order == ChildOrder.NEWEST:
        return qs.order_by("-created_at", "-id")
    return qs.order_by("position", "id")


def hoisted_path(tree: Tree, node: Node, segments: list) -> tuple[list, bool]:
    """The path from the tree's hoisted node down when `node` is under it (and
    whether the hoist applies): loomsidian's hoist shows a subtree as the whole."""
    if not tree.hoisted_id:
        return segments, False
    ids = [s.id for s in segments]
    if tree.hoisted_id in ids:
        return segments[ids.index(tree.hoisted_id) :], True
    # Beyond the window (or elsewhere): under it only if it is an ancestor.
    return segments, segments[0].parent_id is not None and sql.is_ancestor(tree.hoisted_id, node.pk)


def live_generations(tree: Tree, generations) -> list:
    """Generations still streaming into `node`, each with its model's colour and the
    number of placeholders it fills (a reload re-attaches to their streams)."""
    live = list(generations)
    colours = tree.colours_for([str((g.params or {}).get("model") or "") for g in live])
    for g in live:
        g.model = str((g.params or {}).get("model") or "")
        g.colour = colours.get(g.model)
        g.slots = range(int((g.params or {}).get("n") or 1))
    return live


def colour_children(tree: Tree, nodes: list) -> None:
    """Give each model-written node its model's label and colour index."""
    labels = {n.pk: n.model_label() for n in nodes if n.author == Author.MODEL}
    colours = tree.colours_for(list(labels.values()))
    for n in nodes:
        n.model = labels.get(n.pk, "")
        n.colour = colours.get(n.model)


def reader_context(
    tree: Tree,
    node: Node,
    *,
    children_only: bool = False,
    show_archived: bool = False,
    user: Any = None,
) -> dict[str, Any]:
    """`user`: whose undo and redo steps the buttons offer (None: anyone's)."""
    # Live first, then attach the finished: a generation that ends between the two
    # reads is then still live (its socket re-joins and brings the end) or attached.
    # The other order could read it as running before it ended and as not running
    # after, leaving it in neither list, its children on no page until the next open.
    live = [] if children_only else list(running_for(node).order_by("id"))
    materialize_finished(node)
    kids = node.children() if show_archived else node.children().filter(archived=False)
    children = list(in_tree_order(tree, _light(kids))[: NEIGHBOURS + 1])
    colour_children(tree, children)
    ctx: dict[str, Any] = {
        "tree": tree,
        "node": node,
        "children": children[:NEIGHBOURS],
        "more_children": len(children) > NEIGHBOURS,
        "show_archived": show_archived,
    }
    if children_only:
        return ctx
    segments = Node.objects.path_to(node, last=PATH_WINDOW)
    segments, hoisted = hoisted_path(tree, node, segments)
    truncated = segments[0].parent_id is not None and segments[0].id != tree.hoisted_id
    root_id = (
        Node.objects.filter(tree=tree, parent__isnull=True).values_list("id", flat=True).first()
        if truncated
        else segments[0].id
    )
    sibs = node.siblings()
    if not show_archived:
        sibs = sibs.filter(Q(archived=False) | Q(pk=node.pk))  # the current node stays listed
    # Siblings in the children's order, so ↑ ↓ step through the list as it is shown.
    ordered = in_tree_order(tree, _light(sibs), keep=node.pk)
    siblings = list(ordered[: NEIGHBOURS + 1]) if node.parent_id else [node]
    ids = [s.id for s in siblings]
    at = ids.index(node.pk) if node.pk in ids else -1
    visited = [c for c in children if c.visited_at]
    last_child = max(visited, key=lambda c: c.visited_at) if visited else None
    top = tree.hoisted_id if hoisted else root_id
    path = path_context(segments, tree)
    legend = dict(path.pop("models"))
    legend.update((c.model, c.colour) for c in children if c.model)
    ctx.update(
        {
            **path,
            "truncated": truncated,
            "depth": f"{len(segments)}+" if truncated else len(segments) - 1,  # at least
            "ancestors": segments[-OUTLINE_ANCESTORS - 1 : -1],
            "hidden_ancestors": max(0, len(segments) - 1 - OUTLINE_ANCESTORS),
            "siblings": siblings[:NEIGHBOURS] if node.pk != top else [],
            "nav": {
                "parent": (node.parent_id or "") if node.pk != top else "",
                "child": (last_child or children[0]).pk if children else "",
                "prev": ids[at - 1] if at > 0 else "",
                "next": ids[at + 1] if 0 <= at < len(ids) - 1 else "",
                "root": top,
                # The newest child (after a generation, the key n goes to it).
                "newest": max((c.pk for c in children), default=""),
            },
            "hoisted": hoisted,
            "model_legend": sorted(legend.items(), key=lambda kv: kv[1]),
            "live": live_generations(tree, live),
            "last_redo": own_steps(tree, tree.redo_log, user)
            .order_by("-id")
            .values_list("label", flat=True)
            .first(),
            "archived_count": archived_count(node),
            "child_orders": ChildOrder.choices,
            "expansions": recent_expansions(tree),
            "hidden_down": (
                Node.objects.filter(parent_id=node.pk, rating=Rating.DOWN).count()
                if tree.hide_down
                else 0
            ),
            "token_legend": LEGEND,
            "last_undo": own_steps(tree, tree.undo_log, user)
            .order_by("-id")
            .values_list("label", flat=True)
            .first(),
            "settings": (settings := effective_settings(tree)),
            "param_fields": [(f, settings.get(f, "")) for f in PARAM_FIELDS],
            "formats": exporters.FORMATS,
        }
    )
    return ctx


def recent_expansions(tree: Tree) -> list:
    """The tree's expansions running now, and those ended in the last ten minutes."""
    from datetime import timedelta

    from django.utils import timezone

    since = timezone.now() - timedelta(minutes=10)
    return list(
        Expansion.objects.filter(Q(state=Expansion.State.RUNNING) | Q(finished_at__gte=since),
                                 tree=tree).order_by("-id")[:3]
    )  # fmt: skip


def archived_count(node: Node) -> int:
    """Archived children and siblings of `node` (itself excepted): one query."""
    near = Q(parent_id=node.pk)
    if node.parent_id is not None:
        near |= Q(parent_id=node.parent_id)
    return Node.objects.filter(near, archived=True).exclude(pk=node.pk).count()


def path_context(segments, tree: Tree) -> dict[str, Any]:
    """The path as spans; every model-written segment with logprobs as token chips,
    and coloured by its model ("models": [(label, colour index)])."""
    model_ids = [s.id for s in segments if s.author == "model"]
    rows = (
        Node.objects.filter(pk__in=model_ids).values_list(
            "id", "logprobs", "params__model", "checkpoint"
        )
        if model_ids
        else []
    )
    logprobs, labels = {}, {}
    for node_id, lp, model, checkpoint in rows:
        if lp is not None:
            logprobs[node_id] = lp
        labels[node_id] = str(model or checkpoint or "")
    colours = tree.colours_for(list(labels.values()))
    marks = {i: colours[x] for i, x in labels.items() if x}
    return {
        "current_segment": segments[-1],
        "path_before": path_html(segments[:-1], logprobs, tree.pk, marks),
        "current_html": path_html(segments[-1:], logprobs, tree.pk, marks, current=True),
        "models": list(colours.items()),
        # No token scale for a path with no token probabilities (human text only).
        "no_tokens": not logprobs,
    }


def path_html(
    segments,
    logprobs: dict[int, Any],
    tree_id: int,
    colours: dict[int, int] | None = None,
    *,
    current: bool = False,
) -> SafeString:
    """Segments as spans. Built here rather than in a template loop, which costs
    ~60 µs a segment (600 ms for a 10,000-deep path). Every text goes through
    html.escape (here or in core.tokens.chip_html); only the spans around it are ours."""
    parts = []
    for s in segments:
        cls = "seg model" if s.author == "model" else "seg human"
        if colours and s.id in colours:
            cls += f" mc{int(colours[s.id])}"
        if current:
            cls += " current"
        if s.bookmarked:
            cls += " bm"
        chips = chips_for(s.text, logprobs.get(s.id)) if s.author == "model" else None
        attrs = f'class="{cls}" data-id="{int(s.id)}"'
        if current:
            attrs += ' id="current-seg"'
        version = f' data-v="{int(s.version)}"'  # the node's version, for a stale edit
        if chips is None:
            parts.append(f"<span {attrs}{version}>{html.escape(s.text)}</span>")
            continue
        # A click on an alternative makes a sibling of that segment's node.
        branch = reverse("loom:action", args=[tree_id, s.id, "alternative"])
        parts.append(
            f'<span {attrs} data-branch="loom" data-branch-url="{html.escape(branch)}"{version}>'
            f"{chips_html(chips)}</span>"
        )
    return SafeString("".join(parts))


def prose_html(segments, tree: Tree) -> tuple[SafeString, list[tuple[str, int]]]:
    """The path as plain prose for read mode: each segment a span (its model's colour
    class on model-written ones, shown only when asked), every text escaped here; and
    the models as (label, colour index) for the legend."""
    model_ids = [s.id for s in segments if s.author == "model"]
    rows = (
        Node.objects.filter(pk__in=model_ids).values_list("id", "params__model", "checkpoint")
        if model_ids
        else []
    )
    labels = {node_id: str(model or checkpoint or "") for node_id, model, checkpoint in rows}
    colours = tree.colours_for(list(labels.values()))
    parts = []
    for seg in segments:
        cls = "seg model" if seg.author == "model" else "seg human"
        if labels.get(seg.id):
            cls += f" mc{int(colours[labels[seg.id]])}"
        parts.append(f'<span class="{cls}">{html.escape(seg.text)}</span>')
    return SafeString("".join(parts)), sorted(colours.items(), key=lambda kv: kv[1])
