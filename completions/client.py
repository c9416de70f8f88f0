"""The one module that talks HTTP to the completion backend.

`BackendClient` over httpx for the pages' calls (Celery workers, sync views; the /v1
proxy's async path is completions/passthrough.py, on this module's routing), what the
answers mean in completions/answers.py (SSE via httpx-sse, the seed's error envelope
mapped to completions.errors), the models and token counts below, and retries only
where the seed says a retry can help (429 queue_full / rate_limited, 502, 503 —
honouring Retry-After; never 504 or X-Should-Retry: false). Logs carry status,
codes and request ids — never prompt or completion text.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import httpx
from django.conf import settings
from django.core.cache import cache

from completions.answers import (
    Completion,
    CompletionStream,
    check_ok,
    completion,
    error_for_response,
    parse_json,
    transport_error,
)
from completions.errors import (
    BackendError,
    BackendUnavailable,
    TokenizerMissing,
    UpstreamError,
)
from completions.routing import Backend, Route, Table, backends, direct_route, fingerprint, merge
from completions.schema import CompletionParams, ModelInfo
from config.env import without_credentials

log = logging.getLogger(__name__)

Workload = Literal["interactive", "batch"]
MODELS_CACHE_SECONDS = 30
DOWN_CACHE_SECONDS = 5  # a listing with a backend down is kept briefly, to see it return
NO_TOKENIZE_CACHE_SECONDS = 300
TOKENIZER_MISSING = (404, 405, 501)
# Byte-level BPE and SentencePiece-with-byte-fallback tokenizers emit at least one
# byte per token; the slack covers BOS/EOS and SentencePiece's dummy prefix.
TOKEN_BOUND_SLACK = 4

__all__ = [
    "BackendClient",
    "Completion",
    "CompletionStream",
    "ModelInfo",
    "backend_health",
    "count_tokens",
    "get_model",
    "alist_models",
    "list_models",
    "prompt_token_bound",
    "route",
]


def api_base() -> str:
    return settings.WEFT_BACKEND_URL.rstrip("/")


def server_root(model_id: str | None = None) -> str:
    """The root (for /health and /tokenize) of the server that serves model_id — by
    default WEFT_BACKEND_URL's: the API URL without /v1."""
    if model_id is None:
        return api_base().removesuffix("/v1")
    return route(model_id).backend.root


def public_backend_url() -> str:
    """The backend's API URL as it may be shown to users and logs: no credentials."""
    return without_credentials(api_base())


def backend_health() -> None:
    """Raise when no backend answers its /health (one down leaves the others usable)."""
    failures = []
    for backend in backends():
        try:
            httpx.get(f"{backend.root}/health", timeout=2).raise_for_status()
            return
        except httpx.HTTPError as exc:
            log.warning("backend %s health: %s", backend.name, type(exc).__name__)
            failures.append(f"{backend.name}: {type(exc).__name__}")
    raise BackendUnavailable("connect_error", "no backend is healthy (" + "; ".join(failures) + ")")


class _Settings:
    """Connection settings of a client: timeouts, retries, workload headers."""

    def __init__(
        self,
        workload: Workload = "interactive",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        max_retries: int | None = None,
        max_retry_wait: float | None = None,
        refuse_clamped: bool = True,
    ) -> None:
        self.workload = workload
        # A fixed base_url skips routing: everything goes there.
        self.routed = base_url is None
        self.base_url = (base_url or api_base()).rstrip("/")
        self.api_key = settings.WEFT_BACKEND_API_KEY if api_key is None else api_key
        connect = (
            settings.WEFT_BACKEND_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        )
        read = settings.WEFT_BACKEND_READ_TIMEOUT if read_timeout is None else read_timeout
        self.timeout = httpx.Timeout(connect=connect, read=read, write=read, pool=connect)
        self.max_retries = settings.WEFT_BACKEND_MAX_RETRIES if max_retries is None else max_retries
        self.max_retry_wait = (
            settings.WEFT_BACKEND_MAX_RETRY_WAIT if max_retry_wait is None else max_retry_wait
        )
        # Weft refuses a run the backend shortened rather than showing it as complete.
        self.refuse_clamped = refuse_clamped

    def headers(self, api_key: str | None = None) -> dict[str, str]:
        headers = {"X-Acs-Workload": self.workload, "Accept": "application/json"}
        if self.workload == "interactive":  # a page run: the local engine serves it first
            headers["X-Weft-Priority"] = "interactive"
        key = self.api_key if api_key is None else api_key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _target(self, to: Route | None, body: dict[str, Any]) -> tuple[str, str | None, dict]:
        """(base URL, key, body) for the backend a route points at; the body carries
        the backend's own name for the model."""
        if to is None:
            return self.base_url, None, body
        if to.upstream is not None and to.upstream != body.get("model"):
            body = {**body, "model": to.upstream}
        return to.backend.url, to.backend.api_key, body

    def retry_wait(self, error: BackendError, attempt: int) -> float | None:
        """Seconds to wait before retry number attempt+1, or None to give up."""
        if not error.retryable or attempt >= self.max_retries:
            return None
        if error.retry_after is not None:
            # A server asking for a longer pause than we are willing to hold a
            # worker for: report it instead of sleeping.
            return error.retry_after if error.retry_after <= self.max_retry_wait else None
        return min(self.max_retry_wait, 0.5 * 2**attempt) * random.uniform(1.0, 1.25)

    def _wait_or_raise(
        self, response: httpx.Response, method: str, url: str, attempt: int
    ) -> float:
        """The retry decision of both clients' send loops, for a failed (and read)
        response: the seconds to wait before the next attempt, or its error raised."""
        error = error_for_response(response)
        wait = self.retry_wait(error, attempt)
        log.warning(
            "backend %s %s -> %s %s request_id=%s attempt=%d retry_in=%s",
            method, without_credentials(url), error.status, error.code, error.request_id,
            attempt, wait,
        )  # fmt: skip
        if wait is None:
            raise error
        return wait


def _stream_body(params: CompletionParams) -> dict[str, Any]:
    body = params.to_body()
    body["stream"] = True
    return body


def _nonstream_body(params: CompletionParams) -> dict[str, Any]:
    body = params.to_body()
    body["stream"] = False
    body.pop("stream_options", None)
    return body


_shared_lock = threading.Lock()
_shared: dict[int, httpx.Client] = {}


def _shared_sync_client() -> httpx.Client:
    """One pooled httpx.Client per process (it is thread-safe): building a client sets
    up an SSL context, which costs tens of milliseconds per run on a busy machine."""
    pid = os.getpid()  # a forked child must not share its parent's sockets
    with _shared_lock:
        client = _shared.get(pid)
        if client is None:
            client = httpx.Client(
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16)
            )
            _shared[pid] = client
        return client


class BackendClient(_Settings):
    """Synchronous client. Use as a context manager, or call close()."""

    def __init__(self, workload: Workload = "interactive", **options: Any) -> None:
        super().__init__(workload, **options)
        self._http = _shared_sync_client()

    def __enter__(self) -> BackendClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: the connection pool is shared by the process."""

    def _send(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None,
        *,
        stream: bool,
        api_key: str | None = None,
    ) -> httpx.Response:
        """Send with the seed's retry policy; the returned response is open when stream."""
        attempt = 0
        while True:
            request = self._http.build_request(
                method, url, json=body, headers=self.headers(api_key), timeout=self.timeout
            )
            try:
                response = self._http.send(request, stream=stream)
            except httpx.HTTPError as exc:
                raise transport_error(exc) from exc
            if response.status_code < 400:
                return response
            if stream:
                response.read()
                response.close()
            time.sleep(self._wait_or_raise(response, method, url, attempt))
            attempt += 1

    def complete(self, params: CompletionParams) -> Completion:
        to = route(params.model) if self.routed else None
        url, key, body = self._target(to, _nonstream_body(params))
        response = self._send("POST", f"{url}/completions", body, stream=False, api_key=key)
        return completion(response, self.refuse_clamped)

    @contextlib.contextmanager
    def stream(self, params: CompletionParams) -> Iterator[CompletionStream]:
        """`with client.stream(p) as chunks: for chunk in chunks: ...` — leaving the
        block closes the connection, which is how a run is cancelled."""
        to = route(params.model) if self.routed else None
        url, key, body = self._target(to, _stream_body(params))
        response = self._send("POST", f"{url}/completions", body, stream=True, api_key=key)
        try:
            request_id, clamped = check_ok(response, self.refuse_clamped)
            yield CompletionStream(response, request_id, clamped)
        finally:
            response.close()

    def get_json(self, url: str) -> Any:
        response = self._send("GET", url, None, stream=False)
        return parse_json(response.text)

    # vLLM's tokenizer routes sit at the server root, beside /v1.

    def _post_root(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        # The model's own backend, under its own name for the model.
        to = route(body["model"]) if self.routed else None
        url, key, body = self._target(to, body)
        try:
            response = self._send(
                "POST", f"{url.removesuffix('/v1')}{path}", body, stream=False, api_key=key
            )
        except BackendError as exc:
            if exc.status in TOKENIZER_MISSING:
                raise TokenizerMissing(
                    message=f"the backend has no {path}", status=exc.status
                ) from None
            raise
        try:
            answer = parse_json(response.text)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise UpstreamError("bad_response", f"{path} answered no JSON object", 200)
        return answer

    def tokenize(
        self, model_id: str, prompt: str, *, add_special_tokens: bool | None = None
    ) -> list[int]:
        """The token ids of `prompt` (POST /tokenize). Raises TokenizerMissing when the
        backend has none, a BackendError on failure."""
        body: dict[str, Any] = {"model": model_id, "prompt": prompt}
        if add_special_tokens is not None:
            body["add_special_tokens"] = add_special_tokens
        tokens = self._post_root("/tokenize", body).get("tokens")
        if not isinstance(tokens, list) or not all(type(t) is int and t >= 0 for t in tokens):
            raise UpstreamError("bad_response", "/tokenize answered no list of ids", 200)
        return tokens

    def detokenize(self, model_id: str, ids: list[int]) -> str:
        """The text of `ids` (POST /detokenize); an id outside the vocabulary is the
        backend's 400 (InvalidRequest)."""
        text = self._post_root("/detokenize", {"model": model_id, "tokens": ids}).get("prompt")
        if not isinstance(text, str):
            raise UpstreamError("bad_response", "/detokenize answered no text", 200)
        return text

    def count_tokens(self, model_id: str, prompts: list[str | list[int]]) -> list[int]:
        """Exact token counts, one per prompt (ids are counted here)."""
        counts = []
        for prompt in prompts:
            if isinstance(prompt, list):
                counts.append(len(prompt))
                continue
            answer = self._post_root("/tokenize", {"model": model_id, "prompt": prompt})
            count = answer.get("count")
            if type(count) is not int:
                tokens = answer.get("tokens")
                count = len(tokens) if isinstance(tokens, list) else None
            if count is None or count < 0:
                raise UpstreamError("bad_response", "/tokenize answered no count", 200)
            counts.append(count)
        return counts

    @contextlib.contextmanager
    def stream_raw(self, params: CompletionParams) -> Iterator[httpx.Response]:
        """A non-streamed completion whose body the caller reads incrementally (a
        full-vocabulary answer runs to gigabytes): the open response, after the
        door's retries, error statuses and clamp check."""
        to = route(params.model) if self.routed else None
        url, key, body = self._target(to, _nonstream_body(params))
        response = self._send("POST", f"{url}/completions", body, stream=True, api_key=key)
        try:
            check_ok(response, self.refuse_clamped)
            yield response
        finally:
            response.close()


# --- models and tokens -------------------------------------------------------------


def _cache_key(kind: str, backend: Backend | None = None) -> str:
    source = backend.url if backend is not None else fingerprint()
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return f"completions:{kind}:{digest}"


def forget_backend_cache() -> None:
    """Drop what is cached about the backends (their models, whether they can
    tokenize). Never cache.clear(): the cache shares Redis with Celery and Channels."""
    cache.delete_many([_cache_key("models"), *(_cache_key("no-tokenize", b) for b in backends())])


def _model_info(card: dict[str, Any]) -> ModelInfo:
    caps = card.get("capabilities") or {}
    return ModelInfo(
        id=str(card["id"]),
        root=str(card.get("root") or ""),
        max_model_len=card.get("max_model_len"),
        default=bool(card.get("default")),
        # vLLM's own default cap when a backend does not publish one.
        max_logprobs=int(caps.get("max_logprobs", 20)),
        full_vocab_max_prompt_tokens=int(caps.get("full_vocab_max_prompt_tokens", 1024)),
        vocab_size=caps["vocab_size"] if type(caps.get("vocab_size")) is int else None,
    )


def _listing(backend: Backend) -> list[ModelInfo]:
    with BackendClient("interactive", base_url=backend.url, api_key=backend.api_key) as client:
        try:
            body = client.get_json(f"{client.base_url}/models")
        except ValueError:
            raise UpstreamError("bad_response", "the models list is not JSON") from None
    cards = body.get("data", []) if isinstance(body, dict) else []
    return [_model_info(card) for card in cards if isinstance(card, dict)]


def _table(*, refresh: bool = False) -> Table:
    """Every backend's GET /v1/models merged (completions.routing), cached in the
    shared cache; a backend that does not answer is left out until it does."""
    key = _cache_key("models")
    if not refresh:
        cached = cache.get(key)
        if isinstance(cached, Table):
            return cached
    listings: list[tuple[Backend, list[ModelInfo] | None]] = []
    errors: list[BackendError] = []
    for backend in backends():
        try:
            listings.append((backend, _listing(backend)))
        except BackendError as exc:
            log.warning("backend %s models: %s", backend.name, exc.code)
            listings.append((backend, None))
            errors.append(exc)
    if len(errors) == len(listings):
        raise errors[0]
    table = merge(listings)
    cache.set(key, table, DOWN_CACHE_SECONDS if table.down else MODELS_CACHE_SECONDS)
    return table


def list_models(*, refresh: bool = False) -> list[ModelInfo]:
    """Every backend's models under their short ids, exactly one of them the default."""
    return list(_table(refresh=refresh).models)


async def alist_models() -> list[ModelInfo]:
    # In a thread, hit or miss: Django's cache is sync (a blocking Redis read, on a
    # connection of its own per task) and a miss fetches every backend's listing.
    return list((await asyncio.to_thread(_table)).models)


def _info(table: Table, model_id: str | None) -> ModelInfo:
    short_id = table.route(model_id).model_id
    return next(m for m in table.models if m.id == short_id)


def get_model(model_id: str | None) -> ModelInfo:
    """The named model, or the default when None; raises ModelNotFound (or
    BackendUnavailable when its backend may be the one that is down)."""
    return _info(_table(), model_id)


def route(model_id: str | None) -> Route:
    """Which backend serves model_id (None: the default), under which name."""
    return direct_route(model_id) or _table().route(model_id)


def prompt_token_bound(prompt: str | list[int]) -> int:
    """A token count that can never be too low for any byte-level tokenizer."""
    if isinstance(prompt, list):
        return len(prompt)
    return len(prompt.encode("utf-8")) + TOKEN_BOUND_SLACK


def count_tokens(model_id: str, prompt: Any) -> list[int] | None:
    """Exact prompt token counts, one per prompt, via the backend's POST /tokenize
    (at the server root); None when the backend has no /tokenize or it fails."""
    prompts = (
        prompt
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int)
        else [prompt]
    )
    if all(isinstance(p, list) for p in prompts):
        return [len(p) for p in prompts]
    try:
        to = route(model_id)
    except BackendError:
        return None
    missing_key = _cache_key("no-tokenize", to.backend)
    if cache.get(missing_key):
        return None
    try:
        with BackendClient("interactive", max_retries=0) as client:
            return client.count_tokens(model_id, prompts)
    except TokenizerMissing:
        cache.set(missing_key, True, NO_TOKENIZE_CACHE_SECONDS)
    except BackendError:
        pass
    return None
