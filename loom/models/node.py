"""A node of a tree: its own text segment and metadata, and every operation on it
(add, edit, split, merge, move, delete, bookmark, rate, archive, tag, expand an
alternative), each logging its inverse as one undo step through Tree.log.

A node stores only its own text segment; the text of a node is the concatenation of
the segments from the root down to it. The tree is an adjacency list (`parent_id`)
walked by recursive CTEs: a materialized path or an ancestor array would cost
O(depth) bytes per node, which is quadratic storage on a 10,000-deep chain, while
the CTE walks the (parent_id, position) and primary-key indexes in a few
milliseconds (bench/loom_tree.py measures it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from core.tokens import chips_for, text_before
from loom import sql
from loom.models.choices import Author, Rating
from loom.models.errors import LoomError, Stale
from loom.models.queries import NodeQuerySet, Segment
from loom.models.tree import Tree

TAG_MAX = 40
TAGS_PER_NODE = 20


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

    def path(self) -> list[Segment]:
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


def node_record_from_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe dict of every column (datetimes as ISO strings)."""
    out = {}
    for key, value in values.items():
        out[key] = value.isoformat() if hasattr(value, "isoformat") else value
    return out


def _chip_offset(text: str, logprobs: Any, index: int) -> int:
    before = text_before(text, logprobs, index)
    if before is None:
        raise LoomError("That token is not one of this node's tokens.")
    return len(before)


def split_logprobs(text: str, logprobs: Any, offset: int) -> tuple[Any, Any]:
    """A node's logprobs cut at character `offset`: (head's, tail's) when the offset
    falls between two tokens, else (None, None): a cut token has no probability."""
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
