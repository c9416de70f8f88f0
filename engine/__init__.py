"""Weft's local completion engine: vLLM's OpenAI-compatible /v1/completions API over
llama.cpp (a real small model on the CPU) or over a scripted toy model for tests.

Standalone on purpose: nothing here imports Django. Run it with ``python -m engine``;
see engine/README.md for the API, the scripted faults and ``engine.testing.run_engine``.
"""
