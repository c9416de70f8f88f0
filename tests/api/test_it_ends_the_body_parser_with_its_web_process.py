"""The process that parses a web process's large /v1 bodies dies with it — even when the
web process is SIGKILLed — so nothing outlives `make run` or a topology's restart."""

import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from engine.testing import run_engine
from tests.support import Supervisor, child_env, free_port, start_web, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_it_kills_the_parser_when_the_web_process_dies(make_key):
    from django.conf import settings

    _, secret = make_key()
    sup = Supervisor()
    try:
        with run_engine("scripted") as engine:
            env = child_env(settings.DATABASES["default"]["NAME"], WEFT_BACKEND_URL=f"{engine}/v1")
            url = start_web(sup, env, free_port())
            web = sup.children[-1][1]
            big = json.dumps({"model": "scripted", "prompt": "x" * 200_000, "max_tokens": 1})
            answer = httpx.post(f"{url}/v1/completions", content=big, timeout=30,
                                headers={"Authorization": f"Bearer {secret}",
                                         "Content-Type": "application/json"})  # fmt: skip
            assert answer.status_code == 400, answer.text  # too long for the model: read, though
            kids = children(web.pid)  # the parser, and multiprocessing's resource tracker
            parsers = [p for p in kids if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
            assert len(parsers) == 1  # the body went through the parser's process
            os.kill(web.pid, signal.SIGKILL)
            web.wait()
            wait_until(lambda: not any(alive(p) for p in kids), 10, "the parser gone")
    finally:
        sup.stop_all()
