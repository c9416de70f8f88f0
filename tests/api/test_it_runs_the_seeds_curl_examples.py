"""The seed's two curl examples, byte for byte, against Weft's /v1."""

import json
import os
import subprocess

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = """curl -s "$ACS_API_BASE/completions" \\
  -H "Authorization: Bearer $ACS_API_KEY" \\
  -H "Content-Type: application/json" \\
  -d '{"model": "llama-8b", "prompt": "The capital of France is", "max_tokens": 8}'"""

SECOND = """curl -s "$ACS_API_BASE/completions" \\
  -H "Authorization: Bearer $ACS_API_KEY" -H "Content-Type: application/json" \\
  -d '{"model": "llama-8b", "prompt": "The capital of France is",
       "max_tokens": 1, "temperature": 0.7, "logprobs": 5,
       "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "prompt_logprobs": 5}'"""


def run(command: str, base: str, key: str) -> dict:
    env = {**os.environ, "ACS_API_BASE": base, "ACS_API_KEY": key}
    out = subprocess.run(["bash", "-c", command], env=env, capture_output=True, check=True)
    return json.loads(out.stdout)


def test_it_answers_the_first_example(proxy, api_key):
    base, backend = proxy
    body = run(FIRST, base, api_key())
    assert body["object"] == "text_completion"
    assert body["model"] == "weft/scripted-tiny"  # the checkpoint that served
    assert body["usage"]["completion_tokens"] <= 8
    assert body["choices"][0]["finish_reason"] in ("length", "stop")
    sent = backend.requests()[-1]["body"]
    assert sent["model"] == "scripted" and sent["max_tokens"] == 8


def test_it_answers_the_second_example_with_top_level_vllm_fields(proxy, api_key):
    base, backend = proxy
    body = run(SECOND, base, api_key())
    choice = body["choices"][0]
    assert len(choice["logprobs"]["top_logprobs"][0]) >= 5
    assert choice["prompt_logprobs"][0] is None and len(choice["prompt_logprobs"]) > 1
    sent = backend.requests()[-1]["body"]
    assert (sent["top_k"], sent["min_p"], sent["repetition_penalty"]) == (20, 0.05, 1.1)
