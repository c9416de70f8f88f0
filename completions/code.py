"""View code: the exact request of the current settings as curl and as Python with
the openai SDK (vLLM-native parameters go in extra_body, as the seed explains)."""

from __future__ import annotations

import json
from typing import Any

# The seed: these are not on the SDK's typed signature and must travel in extra_body.
EXTRA_BODY = ("top_k", "min_p", "repetition_penalty", "prompt_logprobs", "add_special_tokens")
API_KEY_VAR = "ACS_API_KEY"  # a key from the API keys page, as the seed names it


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def as_curl(body: dict[str, Any], base_url: str) -> str:
    payload = json.dumps(body, indent=2, ensure_ascii=False)
    return (
        f"curl -s {_shell_quote(base_url.rstrip('/') + '/completions')} \\\n"
        f'  -H "Authorization: Bearer ${API_KEY_VAR}" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  -d {_shell_quote(payload)}"
    )


def _py(value: Any) -> str:
    # repr() of JSON values is valid Python (True/False/None, quoted strings).
    return repr(value)


def as_python(body: dict[str, Any], base_url: str) -> str:
    standard = {k: v for k, v in body.items() if k not in EXTRA_BODY}
    extra = {k: v for k, v in body.items() if k in EXTRA_BODY}
    lines = [
        "import os",
        "",
        "from openai import OpenAI",
        "",
        "client = OpenAI(",
        f"    base_url={_py(base_url.rstrip('/'))},",
        f'    api_key=os.environ.get("{API_KEY_VAR}", "none"),',
        ")",
        "",
        "resp = client.completions.create(",
    ]
    lines += [f"    {key}={_py(value)}," for key, value in standard.items()]
    if extra:
        lines.append("    extra_body={  # vLLM-native parameters")
        lines += [f"        {_py(key)}: {_py(value)}," for key, value in extra.items()]
        lines.append("    },")
    lines += [")", "for choice in resp.choices:", "    print(choice.text)"]
    return "\n".join(lines)
