"""Ready-to-run examples for a new key, in the seed's own shape: ACS_API_BASE and
ACS_API_KEY in the environment, then curl or the openai SDK."""

from __future__ import annotations

import json
import shlex

from completions.client import get_model
from completions.errors import BackendError

PROMPT = "The capital of France is"


def default_model_id() -> str:
    try:
        return get_model(None).id
    except BackendError:
        return "MODEL"  # the backends are down: a placeholder the user must fill in


def for_key(base_url: str, secret: str, model: str) -> dict[str, str]:
    """`env`, `curl` and `python` snippets; base_url is this server's /v1."""
    body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 8})
    env = f"export ACS_API_BASE={shlex.quote(base_url)}\nexport ACS_API_KEY={shlex.quote(secret)}"
    curl = (
        'curl -s "$ACS_API_BASE/completions" \\\n'
        '  -H "Authorization: Bearer $ACS_API_KEY" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  -d {shlex.quote(body)}"
    )
    python = (
        "import os\n"
        "from openai import OpenAI\n\n"
        'client = OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])\n'
        f"resp = client.completions.create(model={model!r}, prompt={PROMPT!r}, max_tokens=8)\n"
        "print(resp.model, repr(resp.choices[0].text))"
    )
    return {"env": env, "curl": curl, "python": python}
