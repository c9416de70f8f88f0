"""What a generation sends with the tree's memory and author's note is exact and
visible: the backend receives the assembled prompt, View code shows it with its token
count, the budget refusal counts it, each generated node records what it used, and Weft
JSON carries the tree's memory and note and each node's record."""

import httpx
import pytest

from completions.models import Generation, TokenBudget
from loom.context import Context, assemble
from loom.formats.exporters import weft_json
from loom.formats.importers import import_file
from loom.models import Tree
from tests.loom.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
HX = {"HTTP_HX_REQUEST": "true"}
TEXT = "Chapter one\nThe rain fell.\nShe waited by the door"


def sent_prompts(engine: str) -> list[str]:
    got = httpx.get(f"{engine}/_scripted/requests", timeout=5).json()["requests"]
    return [r["body"]["prompt"] for r in got if r["path"] == "/v1/completions"]


def test_it_sends_and_records_the_memory_and_note(
    loom_stack, backend, client, make_user, make_tree
):
    user = make_user()
    tree = make_tree(user, prompt=TEXT)
    client.force_login(user)
    saved = client.post(
        f"/loom/{tree.pk}/context/",
        {
            "memory": "Genre: gothic",
            "note": "[Tone: dread]",
            "note_depth": "1",
            "note_unit": "newlines",
        },  # fmt: skip
        **HX,
    )
    assert saved.status_code == 200 and "Saved: every generation" in saved.text
    tree.refresh_from_db()
    expected = "Genre: gothic\nChapter one\nThe rain fell.\n[Tone: dread]\nShe waited by the door"
    assert assemble(TEXT, Context.of(tree)) == expected

    # View code: the assembled prompt, and its token count (the text's own beside it).
    code = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/code/", {"model": "scripted", "n": "2"}, **HX
    )
    assert code.status_code == 200
    assert f'<pre id="loom-prompt" class="prompt-view">{expected}</pre>' in code.text
    assert "prompt tokens" in code.text and "the text alone:" in code.text
    assert "&quot;prompt&quot;: &quot;Genre: gothic\\nChapter one" in code.text  # the curl body

    httpx.delete(f"{backend}/_scripted/requests", timeout=5)
    response = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/generate/",
        {"model": "scripted", "n": "2", "max_tokens": "4"},
        **HX,
    )
    assert response.status_code == 200, response.text
    kids = wait_for(
        lambda: list(tree.root.children()) if tree.root.children().count() == 2 else None,
        what="two children",
    )
    assert sent_prompts(backend) == [expected]
    g = Generation.objects.get(owner=user)
    record = {"memory": "Genre: gothic", "note": "[Tone: dread]", "depth": 1, "unit": "newlines"}
    assert g.target["context"] == record and g.params["prompt"] == expected
    assert all(k.prompt_context == record for k in kids)
    # The node's text is the continuation alone: the memory and note are not in the tree.
    assert kids[0].full_text() == TEXT + kids[0].text

    # A note counted in tokens is placed by the model's own tokenizer.
    client.post(
        f"/loom/{tree.pk}/context/",
        {"memory": "", "note": " [x]", "note_depth": "2", "note_unit": "tokens"},
        **HX,
    )
    code = client.post(f"/loom/{tree.pk}/n/{tree.root.pk}/code/", {"model": "scripted"}, **HX)
    # (the scripted tokenizer: " the" and " door" are the last two tokens)
    assert "She waited by [x] the door</pre>" in code.text

    # The budget refusal counts the whole prompt, and says so.
    TokenBudget.objects.create(user=user, monthly_tokens=5)
    refused = client.post(
        f"/loom/{tree.pk}/n/{tree.root.pk}/generate/", {"model": "scripted", "n": "1"}, **HX
    )
    assert refused.status_code == 422
    assert "memory and author&#x27;s note" in refused.text

    # Weft JSON carries them, and reads them back.
    tree.refresh_from_db()
    data = "".join(weft_json(tree)).encode()
    [back] = import_file(user, data, filename="t.weft.json")
    back = Tree.objects.get(pk=back.pk)
    assert (back.memory, back.note, back.note_depth, back.note_unit) == ("", " [x]", 2, "tokens")
    assert [n.prompt_context for n in back.nodes.all() if n.parent_id] == [record] * 2
