"""A download streamed as it is read (History's and Batch's exports): rows are read in
batches, so memory stays bounded whatever the size."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

CHUNK = 200


async def _async_chunks(chunks: Iterator[str]) -> AsyncIterator[str]:
    # Under ASGI Django would buffer a sync iterator whole; this hands it over in
    # batches instead, each read on the one sync thread that owns the DB cursor.
    take = sync_to_async(lambda: list(itertools.islice(chunks, CHUNK)))
    while batch := await take():
        for chunk in batch:
            yield chunk


def download(
    request: HttpRequest, chunks: Iterator[str], filename: str, content_type: str
) -> StreamingHttpResponse:
    """An attachment named `filename` whose body is `chunks`, streamed."""
    content = _async_chunks(chunks) if isinstance(request, ASGIRequest) else chunks
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
