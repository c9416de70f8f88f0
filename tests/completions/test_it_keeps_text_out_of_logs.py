import logging

import pytest

from completions import pipeline

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "Zanzibar-secret-prompt"


def test_it_logs_ids_and_codes_but_never_text(scripted, make_user, unconsumed_queue, caplog):
    user = make_user()
    caplog.set_level(logging.DEBUG)
    scripted.faults({"status": 503, "retry_after": 0}, {}, {"cut_after": 2})
    ok = pipeline.start(
        user, {"model": "scripted", "prompt": PROMPT, "max_tokens": 8}, kind="workbench"
    )
    pipeline.execute(ok.pk)
    cut = pipeline.start(
        user, {"model": "scripted", "prompt": PROMPT, "max_tokens": 8}, kind="workbench"
    )
    pipeline.execute(cut.pk)
    ok.refresh_from_db()
    cut.refresh_from_db()
    assert (ok.state, cut.state) == ("done", "failed")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"generation {ok.pk} done" in logged and "upstream_unavailable" in logged
    for text in [PROMPT, ok.choices[0]["text"].strip(), cut.choices[0]["text"].strip()]:
        assert text and text not in logged
