import pytest

from loom import generation as gen
from loom.models import Node
from tests.loom.conftest import shown_node

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_it_escapes_model_text_tokens_and_alternatives(client, make_user, make_tree):
    from completions.models import Generation

    user = make_user()
    tree = make_tree(user, prompt="Say:")
    tokens = ["<script>", 'alert("x")', "</script>", "<img src=x onerror=alert(1)>"]
    g = Generation.objects.create(
        owner=user, kind="loom", state="done",
        params={"prompt": "Say:", "max_tokens": 4, "logprobs": 1},
        target={"tree": tree.pk, "parent": tree.root.pk},
        choices=[{"index": 0, "text": EVIL, "finish_reason": "length", "logprobs": {
            "tokens": tokens, "token_logprobs": [-0.1, -1.0, -2.0, -3.0],
            "top_logprobs": [{t: -0.1, "<b>bold</b>": -0.5} for t in tokens],
            "text_offset": [0, 8, 18, 27]}}],
    )  # fmt: skip
    [node] = gen.materialize(g)
    assert node.text == EVIL and node.is_model

    client.force_login(user)
    page = client.get(f"/loom/{tree.pk}/n/{node.pk}/").text
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    # The parent's children list and the generation result fragment escape it too.
    parent_page = client.get(f"/loom/{tree.pk}/n/{tree.root.pk}/").text
    assert "<script>alert" not in parent_page and "&lt;script&gt;" in parent_page
    result = client.get(f"/generations/{g.pk}/result/").text
    assert "<script>alert" not in result and "&lt;script&gt;" in result


def test_it_makes_a_sibling_from_an_alternative_token(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="The sky is")
    node = tree.root.add_child(
        " very blue",
        author="model",
        logprobs={"tokens": [" very", " blue"], "token_logprobs": [-0.2, -0.3],
                  "top_logprobs": [{" very": -0.2, " <i>so</i>": -1.5}, {" blue": -0.3, " grey": -1.2}]},
    )  # fmt: skip
    client.force_login(user)
    response = client.post(
        f"/loom/{tree.pk}/n/{node.pk}/alternative/",
        {"index": 1, "token": " grey"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    sibling = Node.objects.filter(parent=tree.root).exclude(pk=node.pk).get()
    assert sibling.text == " very grey"
    assert shown_node(response) == sibling.pk
    bad = client.post(
        f"/loom/{tree.pk}/n/{node.pk}/alternative/",
        {"index": 1, "token": " red"},
        HTTP_HX_REQUEST="true",
    )
    assert bad.status_code == 422 and Node.objects.filter(parent=tree.root).count() == 2
