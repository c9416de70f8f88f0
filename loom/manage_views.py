"""The trees page and what is done to a whole tree: list and search, create, import,
open, rename, duplicate, delete and export. Every view loads the tree through
loom.access.tree_for()."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.forms import first_error
from loom import access, tree_views
from loom import search as finding
from loom.access import tree_for
from loom.formats import exporters, importers
from loom.formats.importers import ImportRefused, import_file
from loom.forms import ExportForm, NewTreeForm, SearchForm, TitleForm
from loom.models import Node, Tree
from loom.shortcuts import node_url, owned_node


def trees(request):
    if request.method == "POST":
        form = NewTreeForm(request.POST)
        if not form.is_valid():
            messages.error(request, first_error(form))
            return redirect("loom:trees")
        tree = Tree.objects.create_from_prompt(
            request.user, form.cleaned_data["prompt"], title=form.cleaned_data["title"]
        )
        return redirect(node_url(tree.current_id or tree.root.pk, tree))
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
    return redirect(node_url(made[0].current_id or made[0].root.pk, made[0]))


@require_GET
def tree_open(request, tree_id: int):
    tree = tree_for(request, tree_id, "view")
    return redirect(node_url(tree.current_id or tree.root.pk, tree))


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
        response = StreamingHttpResponse(_aiter(chunks), content_type=content_type)
    else:
        response = StreamingHttpResponse(chunks, content_type=content_type)
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in tree.title)[:60] or "tree"
    response["Content-Disposition"] = f'attachment; filename="{name}.{suffix}"'
    return response


async def _aiter(chunks: Iterator[str]) -> AsyncIterator[str]:
    pull = sync_to_async(lambda: next(chunks, None), thread_sensitive=True)
    buffer: list[str] = []
    size = 0
    while (chunk := await pull()) is not None:
        buffer.append(chunk)
        size += len(chunk)
        if size >= 64 * 1024:  # fewer, larger writes
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)
