"""Trees of continuations.

A node stores only its own text segment; the text of a node is the
concatenation of the segments from the root down to it. The tree is an
adjacency list (`parent_id`) walked by recursive CTEs: a materialized path or an
ancestor array would cost O(depth) bytes per node, which is quadratic storage
on a 10,000-deep chain, while the CTE walks the (parent_id, position) and
primary-key indexes in a few milliseconds (bench/loom_tree.py measures it).

Every structural change goes through a Node/Tree method that also writes an
UndoEntry, so undo is server-side and survives a reload.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from loom import live, sql
from loom.sql import NODE_TABLE

UNDO_KEEP = 50
TAG_MAX = 40
TAGS_PER_NODE = 20


class Author(models.TextChoices):
    HUMAN = "human", "human"
    MODEL = "model", "model"


class ChildOrder(models.TextChoices):
    """How the reader lists a node's children (the tree's setting, remembered)."""

    POSITION = "position", "as placed"
    RATING = "rating", "rating"
    LOGPROB = "logprob", "mean logprob"
    MODEL = "model", "model"
    NEWEST = "newest", "newest first"


class Rating(models.IntegerChoices):
    UP = 1, "thumbs up"
    DOWN = -1, "thumbs down"


class NoteUnit(models.TextChoices):
    """How the author's note's distance from the end of the path is counted."""

    NEWLINES = "newlines", "newlines"
    TOKENS = "tokens", "tokens"


class WriteMode(models.TextChoices):
    """What typing inside a segment of the document does (the tree's setting)."""

    IN_PLACE = "in_place", "change the node"
    SIBLING = "sibling", "make an edited sibling"


# Distinct model colours (loom.css .mc0 … .mc7); the ninth model reuses the first.
MODEL_COLOURS = 8
# Undo steps logged inside Tree.batch(): {tree id: [(action, data), …]}.
_BATCH: ContextVar[dict[int, list[tuple[str, dict]]] | None] = ContextVar(
    "loom_batch", default=None
)


class LoomError(Exception):
    """An operation that makes no sense for this node (shown to the user)."""


class Stale(LoomError):
    """The node changed since the version an edit, split or merge was based on: not
    applied. Carries the node as it is now, so the writer sees both texts."""

    def __init__(self, node: Node, mine: str = "") -> None:
        self.node = node
        self.mine = mine
        super().__init__(
            f"Node {node.pk} was changed meanwhile (it is at version {node.version} now): "
            "your change was not applied over it."
        )


class TreeQuerySet(models.QuerySet):
    def for_user(self, user) -> TreeQuerySet:
        return self.filter(owner=user)

    @transaction.atomic
    def create_from_prompt(self, owner, prompt: str, *, title: str = "", settings=None) -> Tree:
        title = title.strip() or _title_from(prompt)
        tree = self.create(owner=owner, title=title, settings=settings or {})
        root = Node.objects.create(
            tree=tree, parent=None, position=0, text=prompt, written_by=owner
        )
        tree.current = root
        tree.save(update_fields=["current"])
        return tree


def _title_from(text: str) -> str:
    words = " ".join(text.split())
    return (words[:60] + "…") if len(words) > 60 else (words or "Untitled tree")


class Tree(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="loom_trees"
    )
    title = models.CharField(max_length=200)
    # Defaults for new generations (any field of the door's CompletionParams);
    # validated by the door when a generation starts, not here.
    settings = models.JSONField(default=dict, blank=True)
    # Top-level keys of an imported file that Weft does not use (pyloom's
    # chapters, preferences, …), written back on export.
    extra = models.JSONField(default=dict, blank=True)
    current = models.ForeignKey(
        "Node", null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    # The reader's top when set (loomsidian's hoist): the path shows from here down.
    hoisted = models.ForeignKey(
        "Node", null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    write_mode = models.CharField(
        max_length=10, choices=WriteMode.choices, default=WriteMode.IN_PLACE
    )
    # {model label: colour index}, assigned once per tree so a model keeps its colour.
    model_colours = models.JSONField(default=dict, blank=True)
    # How the reader lists children, and whether thumbs-down children are left out.
    child_order = models.CharField(
        max_length=10, choices=ChildOrder.choices, default=ChildOrder.POSITION
    )
    hide_down = models.BooleanField(default=False)
    # The read-only link's secret (loom/access.py): null while the link is off. Kept as
    # it is, not hashed, so the owner can copy the link again; turning it off and on
    # draws a new one, so an old link never works again.
    link_token = models.CharField(max_length=64, null=True, blank=True, unique=True)
    # Memory: text put before every generation's prompt; the author's note: text put
    # `note_depth` newlines (or tokens) before the end of the path (loom/context.py).
    memory = models.TextField(blank=True)
    note = models.TextField(blank=True)
    note_depth = models.PositiveIntegerField(default=3)
    note_unit = models.CharField(max_length=8, choices=NoteUnit.choices, default=NoteUnit.NEWLINES)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TreeQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title

    @property
    def root(self) -> Node:
        return Node.objects.get(tree=self, parent__isnull=True)

    def node_count(self) -> int:
        return self.nodes.count()

    def lock(self) -> None:
        """Serialise structural edits of this tree (SELECT … FOR UPDATE on its
        row, to the end of the transaction): two moves checked in parallel
        could otherwise each pass the ancestor check and make a cycle."""
        Tree.objects.select_for_update().filter(pk=self.pk).values_list("pk", flat=True).first()

    def touch(self, ids: list[int] | tuple[int, ...] = (), event: str = "changed") -> None:
        """Every change of the tree's nodes ends here (Tree.log, undo, a generation's
        nodes arriving): the tree's open pages hear of it once it commits."""
        now = timezone.now()
        Tree.objects.filter(pk=self.pk).update(updated_at=now)
        # The stamp names this state of the tree: the pages' re-read parts are cached by it.
        live.publish(self.pk, event, ids, stamp=now.timestamp())

    @transaction.atomic
    def duplicate(self, *, title: str | None = None, owner: Any = None) -> Tree:
        """Copy every node in one INSERT … SELECT: no Python objects per node. The copy
        is `owner`'s (an editor's copy of a shared tree), else this tree's owner's."""
        copy = Tree.objects.create(
            owner=owner or self.owner,
            title=title or f"{self.title} (copy)",
            settings=self.settings,
            extra=self.extra,
            memory=self.memory,
            note=self.note,
            note_depth=self.note_depth,
            note_unit=self.note_unit,
            child_order=self.child_order,
            hide_down=self.hide_down,
        )
        columns = [c for c in _copy_columns() if c not in ("id", "tree_id", "parent_id")]
        cols = ", ".join(columns)
        src = ", ".join(f"n.{c}" for c in columns)
        with connection.cursor() as cur:
            # A CTE referenced twice is materialized once, so each old id gets exactly one new id.
            cur.execute(
                f"""
                WITH m AS MATERIALIZED (
                    SELECT id AS old, nextval(pg_get_serial_sequence('{NODE_TABLE}', 'id')) AS new
                    FROM {NODE_TABLE} WHERE tree_id = %s
                )
                INSERT INTO {NODE_TABLE} (id, tree_id, parent_id, {cols})
                SELECT m.new, %s, pm.new, {src}
                FROM {NODE_TABLE} n JOIN m ON m.old = n.id LEFT JOIN m pm ON pm.old = n.parent_id
                """,  # noqa: S608 - identifiers are ours, values are parameters
                [self.pk, copy.pk],
            )
        root = copy.root
        copy.current = root
        copy.save(update_fields=["current"])
        return copy

    # --- undo ---------------------------------------------------------------------

    def log(self, action: str, label: str, data: dict) -> None:
        batch = _BATCH.get()
        if batch is not None and self.pk in batch:
            batch[self.pk].append((action, data))
            return
        who = live.origin()
        UndoEntry.objects.create(
            tree=self, action=action, label=label, data=data, user_id=who and who.user_id
        )
        keep = list(self.undo_log.order_by("-id").values_list("id", flat=True)[:UNDO_KEEP])
        if len(keep) == UNDO_KEEP:
            self.undo_log.filter(id__lt=keep[-1]).delete()
        # A new change ends what could be redone (as in every editor).
        self.redo_log.all().delete()
        self.touch(live.node_ids(data), event=action)

    @contextmanager
    def batch(self, label: str) -> Iterator[None]:
        """Log every step made inside as one undo step ("batch"), undone in reverse
        order. Use inside a transaction: a step that fails leaves nothing logged."""
        outer = _BATCH.get()
        steps: list[tuple[str, dict]] = []
        token = _BATCH.set({**(outer or {}), self.pk: steps})
        try:
            yield
        finally:
            _BATCH.reset(token)
        if len(steps) == 1:
            self.log(steps[0][0], label, steps[0][1])
        elif steps:
            self.log("batch", label, {"steps": [{"action": a, "data": d} for a, d in steps]})

    # --- view state ------------------------------------------------------------------

    def colours_for(self, labels: list[str]) -> dict[str, int]:
        """The colour index of each model label, giving new labels the next indices
        (kept on the tree, so a model's colour never changes)."""
        wanted = [x for x in dict.fromkeys(labels) if x]
        if any(x not in (self.model_colours or {}) for x in wanted):
            with transaction.atomic():
                row = Tree.objects.select_for_update().only("model_colours").get(pk=self.pk)
                colours = dict(row.model_colours or {})
                for x in wanted:
                    colours.setdefault(x, len(colours) % MODEL_COLOURS)
                Tree.objects.filter(pk=self.pk).update(model_colours=colours)
                self.model_colours = colours
        return {x: self.model_colours[x] for x in wanted}

    def hoist(self, node: Node | None) -> None:
        if node is not None and node.tree_id != self.pk:
            raise LoomError("Only a node of this tree can be hoisted.")
        self.hoisted = node
        Tree.objects.filter(pk=self.pk).update(hoisted=node)


def _copy_columns() -> list[str]:
    return [f.column for f in Node._meta.concrete_fields]


# --- nodes ----------------------------------------------------------------------


class Segment(NamedTuple):
    """One step of a path, as the reading view needs it."""

    id: int
    parent_id: int | None
    text: str
    author: str
    bookmarked: bool
    version: int = 1  # what an edit of it in the document is based on

    @property
    def is_model(self) -> bool:
        return self.author == Author.MODEL


class NodeQuerySet(models.QuerySet):
    def path_to(self, node: Node | int, *, last: int | None = None) -> list[Segment]:
        """The segments from the root down to `node` (inclusive), or only the
        `last` ones nearest the node: one query that stops walking up there.

        Returns light named tuples rather than model instances: building 10,000
        Node objects costs more than the query itself."""
        node_id = node.pk if isinstance(node, Node) else node
        return [Segment(*row) for row in sql.path_rows(node_id, last)]

    def subtree_ids(self, node: Node | int) -> list[int]:
        """The node and all its descendants: one query."""
        return sql.subtree_ids(node.pk if isinstance(node, Node) else node)

    def is_ancestor(self, maybe_ancestor: Node, node: Node) -> bool:
        """True if maybe_ancestor is on the path to node (or is node)."""
        return sql.is_ancestor(maybe_ancestor.pk, node.pk)

    def bookmark_step(self, tree: Tree, node: Node | int, direction: str) -> int | None:
        """The id of the next (or previous) bookmark after `node` in preorder,
        wrapping around; None when the tree has no bookmarks. One query."""
        return sql.bookmark_step(tree.pk, node.pk if isinstance(node, Node) else node, direction)

    def preorder(
        self, tree: Tree, *, select: str | None = None, chunk: int = 5000
    ) -> Iterator[tuple[int, Any]]:
        """(depth, row) for every node of `tree` in depth-first preorder,
        siblings in order. A row is a dict of every column, or, given `select`
        (an SQL select list over the node table), that query's tuple.

        Memory: the id skeleton (two ints per node) plus one chunk of rows; the
        texts are never all in memory at once. Depth costs nothing: the walk
        uses an explicit stack, never Python recursion."""
        kids: dict[int | None, list[int]] = {}
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT id, parent_id FROM {NODE_TABLE} WHERE tree_id = %s "  # noqa: S608
                "ORDER BY position, id",
                [tree.pk],
            )
            while rows := cur.fetchmany(10_000):
                for node_id, parent_id in rows:
                    kids.setdefault(parent_id, []).append(node_id)
        # An explicit stack of (depth, id); children pushed reversed so the first pops first.
        stack = [(0, r) for r in reversed(kids.get(None, []))]
        batch: list[tuple[int, int]] = []
        while stack:
            depth, node_id = stack.pop()
            batch.append((depth, node_id))
            for child in reversed(kids.pop(node_id, [])):
                stack.append((depth + 1, child))
            if len(batch) >= chunk or not stack:
                ids = [i for _, i in batch]
                if select is None:
                    rows = {r["id"]: r for r in self.filter(id__in=ids).values()}
                else:
                    with connection.cursor() as cur:
                        cur.execute(
                            f"SELECT id, {select} FROM {NODE_TABLE} WHERE id = ANY(%s)",  # noqa: S608
                            [ids],
                        )
                        rows = {r[0]: r[1:] for r in cur.fetchall()}
                for d, i in batch:
                    yield d, rows[i]
                batch = []


class Node(models.Model):
    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="nodes")
    # DB_CASCADE: deleting a subtree is one DELETE that Postgres cascades; Django's
    # collector would walk it level by level (and recurse) in Python.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DB_CASCADE,
        related_name="kids",
        db_index=False,  # covered by the (parent, position) index
    )
    position = models.PositiveIntegerField(default=0)
    text = models.TextField(blank=True)
    author = models.CharField(max_length=5, choices=Author.choices, default=Author.HUMAN)
    # Who made the node: the user who typed it, or who asked for its generation (null
    # for imported nodes and once that user is deleted).
    written_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
        db_index=False,  # the partial index below: most imported nodes have none
    )
    # Model metadata (empty for human nodes).
    checkpoint = models.CharField(max_length=300, blank=True)
    request_id = models.CharField(max_length=200, blank=True)
    params = models.JSONField(null=True, blank=True)
    seed = models.BigIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=20, blank=True)
    logprobs = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    visited_at = models.DateTimeField(null=True, blank=True)
    bookmarked = models.BooleanField(default=False)
    rating = models.SmallIntegerField(choices=Rating.choices, null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    archived = models.BooleanField(default=False)
    # The node's id in the file it was imported from (pyloom uuid, …), reused on export.
    source_id = models.CharField(max_length=100, blank=True)
    # Keys of an imported node that Weft does not use, written back on export.
    extra = models.JSONField(default=dict, blank=True)
    # The memory and author's note its generation used ({memory, note, depth, unit}), so
    # what was sent can be told (and sent again) exactly; null for none.
    prompt_context = models.JSONField(null=True, blank=True)
    # Bumped on every change of the text (edit, split, merge and their undo): an edit
    # based on an older version is not applied over someone else's (Stale).
    version = models.PositiveIntegerField(default=1)

    objects = NodeQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["parent", "position"], name="loom_node_children"),
            models.Index(fields=["tree", "parent"], name="loom_node_tree_parent"),
            models.Index(
                fields=["tree", "id"],
                condition=models.Q(bookmarked=True),
                name="loom_node_bookmarks",
            ),
            models.Index(
                fields=["written_by"],
                condition=models.Q(written_by__isnull=False),
                name="loom_node_written_by",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["tree"], condition=models.Q(parent__isnull=True), name="loom_one_root"
            )
        ]

    def __str__(self) -> str:
        return f"node {self.pk}"

    @property
    def is_model(self) -> bool:
        return self.author == Author.MODEL

    # --- reading ------------------------------------------------------------------

    def children(self) -> NodeQuerySet:
        return Node.objects.filter(parent_id=self.pk).order_by("position", "id")

    def siblings(self) -> NodeQuerySet:
        """The node's parent's children, the node included."""
        if self.parent_id is None:
            return Node.objects.filter(pk=self.pk)
        return Node.objects.filter(parent_id=self.parent_id).order_by("position", "id")

    def path(self) -> list[Node]:
        return Node.objects.path_to(self)

    def full_text(self) -> str:
        return "".join(n.text for n in Node.objects.path_to(self))

    @property
    def unread(self) -> bool:
        return self.author == Author.MODEL and self.visited_at is None

    def mark_visited(self) -> None:
        Node.objects.filter(pk=self.pk).update(visited_at=timezone.now())

    # --- changing (each logs its inverse) -----------------------------------------

    def _next_position(self) -> int:
        top = self.children().aggregate(m=models.Max("position"))["m"]
        return 0 if top is None else top + 1

    @transaction.atomic
    def add_child(
        self, text: str = "", *, author: str = Author.HUMAN, log: bool = True, **meta
    ) -> Node:
        child = Node.objects.create(
            tree_id=self.tree_id,
            parent=self,
            position=self._next_position(),
            text=text,
            author=author,
            **meta,
        )
        if log:
            self.tree.log("add", "add a node", {"node": child.pk, "focus": self.pk})
        return child

    def check_version(self, based_on: int | None, mine: str = "") -> None:
        """Lock the row and read its version again (a change committed meanwhile
        counts): raise Stale when it is not the one the writer's change was based on.
        None: the caller did not say (an older page, a script), nothing is checked."""
        now = Node.objects.select_for_update().filter(pk=self.pk).values("version", "text").first()
        if now is None:
            raise LoomError(f"Node {self.pk} is gone.")
        self.version, self.text = now["version"], now["text"]
        if based_on is not None and based_on != self.version:
            raise Stale(self, mine)

    @transaction.atomic
    def edit(
        self, text: str, *, as_sibling: bool = False, by: Any = None, based_on: int | None = None
    ) -> Node:
        """Change the text in place, or keep this node and add the edit as a new
        sibling right after it (written by `by`). Returns the node that holds the new
        text. In place, the node keeps its writer: who made it, not who last changed it;
        `based_on` is the version the writer saw (Stale when it is not the current)."""
        if as_sibling:
            if self.parent_id is None:
                raise LoomError("The root has no siblings; edit it in place.")
            sibling = Node.objects.create(
                tree_id=self.tree_id, parent_id=self.parent_id, position=0, text=text,
                written_by=by,
            )  # fmt: skip
            order = [n for n in self.siblings().exclude(pk=sibling.pk).values_list("id", flat=True)]
            order.insert(order.index(self.pk) + 1, sibling.pk)
            set_order(self.parent_id, order)
            self.tree.log("add", "edit as a new sibling", {"node": sibling.pk, "focus": self.pk})
            return sibling
        self.check_version(based_on, text)
        if text == self.text:
            return self
        old = {"node": self.pk, "text": self.text, "logprobs": self.logprobs}
        self.text = text
        self.version += 1
        # Token probabilities describe the generated tokens; after an edit they no longer do.
        self.logprobs = None
        self.save(update_fields=["text", "logprobs", "version"])
        self.tree.log("edit", "edit a node", old)
        return self

    @transaction.atomic
    def split(self, offset: int, *, based_on: int | None = None) -> Node:
        """Cut the segment at `offset`: this node keeps the head, a new child gets
        the tail and adopts this node's children. Returns the new child."""
        self.tree.lock()
        self.check_version(based_on)
        if not 0 < offset < len(self.text):
            raise LoomError("Split inside the text, not at its start or end.")
        old_text, old_logprobs = self.text, self.logprobs
        head_lp, tail_lp = split_logprobs(old_text, old_logprobs, offset)
        kid_ids = list(self.children().values_list("id", flat=True))
        tail = Node.objects.create(
            tree_id=self.tree_id,
            parent=self,
            position=0,
            text=old_text[offset:],
            author=self.author,
            checkpoint=self.checkpoint,
            request_id=self.request_id,
            params=self.params,
            seed=self.seed,
            finish_reason=self.finish_reason,
            logprobs=tail_lp,
            prompt_context=self.prompt_context,
            written_by_id=self.written_by_id,  # the same text, the same writer
        )
        Node.objects.filter(id__in=kid_ids).update(parent=tail)
        self.text = old_text[:offset]
        self.logprobs = head_lp
        self.version += 1
        self.save(update_fields=["text", "logprobs", "version"])
        self.tree.log(
            "split",
            "split a node",
            {"node": self.pk, "tail": tail.pk, "text": old_text, "logprobs": old_logprobs},
        )
        return tail

    def model_label(self) -> str:
        """What the Loom colours a model-written node by: the short id it was asked
        of, else the checkpoint that served it."""
        return str((self.params or {}).get("model") or self.checkpoint or "")

    @transaction.atomic
    def expand_alternatives(self, index: int) -> list[Node]:
        """One single-token child per alternative of token `index` (the sampled one
        excepted): siblings of this node when the token is its first, else children
        of its head after a split right before the token. One undo step."""
        from core.tokens import chips_for

        lp = self.logprobs or {}
        chip = next((c for c in chips_for(self.text, lp) or [] if c.index == index), None)
        if chip is None or not chip.in_text:
            raise LoomError("That token is not one of this node's tokens.")
        tops = lp.get("top_logprobs") or []
        top = tops[index] if index < len(tops) and isinstance(tops[index], dict) else {}
        sampled = (lp.get("tokens") or [])[index]
        alts = [(t, v) for t, v in top.items() if t != sampled and isinstance(v, int | float)]
        if not alts:
            raise LoomError("This token has no alternatives to expand.")
        offset = _chip_offset(self.text, lp, index)
        with self.tree.batch(f"expand {len(alts)} alternatives"):
            if offset == 0:
                if self.parent_id is None:
                    raise LoomError("The root's first token has no place for siblings.")
                parent = Node.objects.get(pk=self.parent_id)
            else:
                self.split(offset)
                parent = self
            made = []
            for text, logprob in sorted(alts, key=lambda kv: -kv[1]):
                one = {"tokens": [text], "token_logprobs": [logprob], "top_logprobs": [top]}
                made.append(
                    parent.add_child(
                        text,
                        author=Author.MODEL,
                        checkpoint=self.checkpoint,
                        request_id=self.request_id,
                        params=self.params,
                        prompt_context=self.prompt_context,
                        logprobs=one,
                        written_by_id=self.written_by_id,  # its generation's asker's
                    )
                )
        return made

    @transaction.atomic
    def merge_into_parent(self, *, based_on: int | None = None) -> Node:
        """Append this segment to the parent's; this node's children take its
        place among the parent's children (as in pyloom). Returns the parent."""
        if self.parent_id is None:
            raise LoomError("The root has no parent to merge into.")
        self.tree.lock()
        self.check_version(based_on)
        parent = Node.objects.select_for_update().get(pk=self.parent_id)
        data = {
            "row": node_record(self),
            "parent": parent.pk,
            "parent_text": parent.text,
            "parent_logprobs": parent.logprobs,
            "children": list(self.children().values_list("id", flat=True)),
            "order": list(self.siblings().values_list("id", flat=True)),
        }
        merge_nodes(self, parent)
        self.tree.log("merge", "merge into parent", data)
        return parent

    @transaction.atomic
    def move_to(self, new_parent: Node) -> None:
        if new_parent.tree_id != self.tree_id:
            raise LoomError("A node can only move within its tree.")
        self.tree.lock()
        # Read again under the lock: a move committed meanwhile counts.
        self.refresh_from_db(fields=["parent", "position"])
        if self.parent_id is None:
            raise LoomError("The root cannot move.")
        if Node.objects.is_ancestor(self, new_parent):
            raise LoomError("A node cannot move under itself or its own descendants.")
        data = {
            "node": self.pk,
            "parent": self.parent_id,
            "order": list(self.siblings().values_list("id", flat=True)),
            "to": new_parent.pk,  # for the live event only (undo puts it back under parent)
        }
        self.parent = new_parent
        self.position = new_parent._next_position()
        self.save(update_fields=["parent", "position"])
        self.tree.log("move", "move a subtree", data)

    @transaction.atomic
    def delete_subtree(self) -> int:
        """Delete this node and everything under it; the rows go into the undo
        log so that undo can put them back with the same ids."""
        if self.parent_id is None:
            raise LoomError("The root cannot be deleted; delete the tree instead.")
        self.tree.lock()
        ids = Node.objects.subtree_ids(self)
        rows = [node_record_from_values(v) for v in Node.objects.filter(id__in=ids).values()]
        order = list(self.siblings().values_list("id", flat=True))
        Node.objects.filter(pk=self.pk).delete()  # Postgres cascades to the descendants
        self.tree.log(
            "delete",
            f"delete {len(ids)} node{'s' if len(ids) != 1 else ''}",
            {"rows": rows, "parent": self.parent_id, "order": order, "focus": self.pk},
        )
        return len(ids)

    @transaction.atomic
    def toggle_bookmark(self) -> bool:
        self.bookmarked = not self.bookmarked
        self.save(update_fields=["bookmarked"])
        self.tree.log(
            "bookmark",
            "bookmark" if self.bookmarked else "remove a bookmark",
            {"node": self.pk, "value": not self.bookmarked},
        )
        return self.bookmarked

    @transaction.atomic
    def rate(self, value: int | None) -> int | None:
        """Thumbs up (1), down (-1) or neither (None); one undo step."""
        if value not in (None, *Rating.values):
            raise LoomError("A rating is thumbs up or thumbs down.")
        if value == self.rating:
            return value
        old = self.rating
        self.rating = value
        self.save(update_fields=["rating"])
        label = {1: "rate thumbs up", -1: "rate thumbs down", None: "clear a rating"}[value]
        self.tree.log("rate", label, {"node": self.pk, "value": old})
        return value

    @transaction.atomic
    def toggle_archive(self) -> bool:
        """Prune: an archived node stays in the tree (and the path through it)
        but is left out of the children and outline lists unless asked for."""
        if self.parent_id is None:
            raise LoomError("The root cannot be archived.")
        self.archived = not self.archived
        self.save(update_fields=["archived"])
        self.tree.log(
            "archive",
            "archive a node" if self.archived else "unarchive a node",
            {"node": self.pk, "value": not self.archived},
        )
        return self.archived

    @transaction.atomic
    def add_tag(self, tag: str) -> None:
        tag = " ".join(tag.split())
        if not tag:
            raise LoomError("Write a tag to add.")
        if len(tag) > TAG_MAX:
            raise LoomError(f"A tag is at most {TAG_MAX} characters.")
        tags = list(self.tags or [])
        if tag in tags:
            return
        if len(tags) >= TAGS_PER_NODE:
            raise LoomError(f"A node has at most {TAGS_PER_NODE} tags.")
        self._set_tags([*tags, tag], f"tag “{tag}”")

    @transaction.atomic
    def remove_tag(self, tag: str) -> None:
        tags = list(self.tags or [])
        if tag in tags:
            self._set_tags([t for t in tags if t != tag], f"remove tag “{tag}”"[:100])

    def _set_tags(self, tags: list[str], label: str) -> None:
        old = self.tags
        self.tags = tags
        self.save(update_fields=["tags"])
        self.tree.log("tags", label[:100], {"node": self.pk, "tags": old})


class RedoEntry(models.Model):
    """An undone step, ready to be done again; any new change clears them."""

    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="redo_log")
    # Who made the step: undo and redo act on the user's own steps (null: before
    # shared trees, or outside a request; the owner's).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.DB_SET_NULL,
        related_name="+", db_index=False,
    )  # fmt: skip
    action = models.CharField(max_length=20)
    label = models.CharField(max_length=100)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tree", "-id"], name="loom_redo_latest")]

    def __str__(self) -> str:
        return self.label


class UndoEntry(models.Model):
    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="undo_log")
    # Who made the step: undo and redo act on the user's own steps (null: before
    # shared trees, or outside a request; the owner's).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.DB_SET_NULL,
        related_name="+", db_index=False,
    )  # fmt: skip
    action = models.CharField(max_length=20)
    label = models.CharField(max_length=100)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tree", "-id"], name="loom_undo_latest")]

    def __str__(self) -> str:
        return self.label


# --- helpers shared by the operations and their inverses ----------------------------


def set_order(parent_id: int, ids: list[int]) -> None:
    """Renumber the parent's children: `ids` first in that order (missing ones
    skipped), then any other current children in their present order."""
    current = list(
        Node.objects.filter(parent_id=parent_id)
        .order_by("position", "id")
        .values_list("id", flat=True)
    )
    present = set(current)
    wanted = [i for i in ids if i in present]
    seen = set(wanted)
    sql.renumber(wanted + [i for i in current if i not in seen])


def merge_nodes(node: Node, parent: Node) -> None:
    kids = list(node.children().values_list("id", flat=True))
    order = list(node.siblings().values_list("id", flat=True))
    at = order.index(node.pk)
    order[at : at + 1] = kids
    Node.objects.filter(id__in=kids).update(parent=parent)
    parent.text += node.text
    parent.logprobs = None
    parent.save(update_fields=["text", "logprobs"])
    Node.objects.filter(pk=parent.pk).update(version=models.F("version") + 1)
    Tree.objects.filter(current_id=node.pk).update(current=parent)
    Node.objects.filter(pk=node.pk).delete()
    set_order(parent.pk, order)


def node_record(node: Node) -> dict[str, Any]:
    return node_record_from_values(
        {f.attname: getattr(node, f.attname) for f in Node._meta.concrete_fields}
    )


def node_record_from_values(values: dict) -> dict[str, Any]:
    """A JSON-safe dict of every column (datetimes as ISO strings)."""
    out = {}
    for key, value in values.items():
        out[key] = value.isoformat() if hasattr(value, "isoformat") else value
    return out


def _chip_offset(text: str, logprobs: Any, index: int) -> int:
    from core.tokens import text_before

    before = text_before(text, logprobs, index)
    if before is None:
        raise LoomError("That token is not one of this node's tokens.")
    return len(before)


def split_logprobs(text: str, logprobs: Any, offset: int) -> tuple[Any, Any]:
    """A node's logprobs cut at character `offset`: (head's, tail's) when the offset
    falls between two tokens, else (None, None): a cut token has no probability."""
    from core.tokens import chips_for

    if not isinstance(logprobs, dict):
        return None, None
    pos = 0
    for chip in chips_for(text, logprobs) or []:
        if pos == offset and chip.index is not None:
            i = chip.index
            cut = {k: v for k, v in logprobs.items() if k not in _TOKEN_COLUMNS}
            head = {
                **cut,
                **{k: logprobs[k][:i] for k in _TOKEN_COLUMNS if isinstance(logprobs.get(k), list)},
            }
            tail = {
                **cut,
                **{k: logprobs[k][i:] for k in _TOKEN_COLUMNS if isinstance(logprobs.get(k), list)},
            }
            if isinstance(tail.get("text_offset"), list) and tail["text_offset"]:
                start = tail["text_offset"][0]
                tail["text_offset"] = [
                    o - start if isinstance(o, int) else o for o in tail["text_offset"]
                ]
            return head, tail
        if chip.in_text:
            pos += len(chip.text)
        if pos > offset:
            break
    return None, None


_TOKEN_COLUMNS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


class Expansion(models.Model):
    """An automatic expansion of a node: `depth` levels of `breadth` children each,
    optionally only the best `keep` of each node's children taken further (by mean
    logprob). Its generations are bulk work (loom/expansion.py); everything it adds is
    one undo step (`undo_entry`, whose steps grow as the nodes arrive)."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        CANCELLED = "cancelled", "cancelled"
        STOPPED = "stopped", "stopped"  # a later level could not start (budget, backend)

    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="expansions")
    root = models.ForeignKey(
        Node, null=True, on_delete=models.DB_SET_NULL, related_name="+", db_index=False
    )
    depth = models.PositiveSmallIntegerField()
    breadth = models.PositiveSmallIntegerField()
    keep = models.PositiveSmallIntegerField(null=True, blank=True)
    # The door's request without its prompt (n = breadth), and the memory and note it
    # was started with (every level uses the same).
    body = models.JSONField()
    context = models.JSONField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    worst_case_tokens = models.BigIntegerField(default=0)
    started = models.PositiveIntegerField(default=0)  # generations sent
    finished = models.PositiveIntegerField(default=0)  # generations ended
    nodes = models.PositiveIntegerField(default=0)  # children made
    message = models.TextField(blank=True)
    undo_entry = models.ForeignKey(
        UndoEntry, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tree", "state"], name="loom_expansion_tree_state")]

    def __str__(self) -> str:
        return f"expansion {self.pk}"

    @property
    def is_running(self) -> bool:
        return self.state == self.State.RUNNING


# --- sharing (the rules are in loom/access.py) -----------------------------------------


class ShareRole(models.TextChoices):
    """What a tree's owner gives another user; the owner's own role is "owner"."""

    EDITOR = "editor", "editor"
    VIEWER = "viewer", "viewer"


class TreeShare(models.Model):
    """The owner shared the tree with `user`, as editor or viewer."""

    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="shares")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="loom_shares"
    )
    role = models.CharField(max_length=6, choices=ShareRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tree", "user"], name="loom_share_once"),
            models.CheckConstraint(
                condition=models.Q(role__in=ShareRole.values), name="loom_share_role"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.role} on {self.tree_id}"


class LinkGrant(models.Model):
    """A signed-in user opened the tree's read-only link: the tree is in their list
    ("via link") while the link stays on; turning it off deletes every grant."""

    tree = models.ForeignKey(Tree, on_delete=models.DB_CASCADE, related_name="link_grants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DB_CASCADE, related_name="loom_link_grants"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tree", "user"], name="loom_link_once")]

    def __str__(self) -> str:
        return f"{self.user_id} via link on {self.tree_id}"
