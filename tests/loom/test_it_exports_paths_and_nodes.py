import json

import pytest
from django.http import StreamingHttpResponse

from loom.models import Author

pytestmark = pytest.mark.django_db


def body(response):
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


def test_it_streams_every_export_format(client, make_user, make_tree):
    user = make_user()
    tree = make_tree(user, prompt="Title line", title="My | tree")
    a = tree.root.add_child(" human bit")
    b = a.add_child(" model | bit", author=Author.MODEL, checkpoint="ckpt")
    a.add_child(" other branch")
    client.force_login(user)

    text = body(client.get(f"/loom/{tree.pk}/export/txt/?node={b.pk}"))
    assert text == "Title line human bit model | bit"
    md = body(client.get(f"/loom/{tree.pk}/export/md/?node={b.pk}"))
    assert md.startswith("# My | tree\n\nTitle line human bit model | bit\n")
    assert "| 2 | model |  model \\| bit |" in md

    lines = [
        json.loads(line) for line in body(client.get(f"/loom/{tree.pk}/export/jsonl/")).splitlines()
    ]
    assert [n["text"] for n in lines] == [
        "Title line",
        " human bit",
        " model | bit",
        " other branch",
    ]
    assert (
        lines[2]["parent_id"] == a.pk
        and lines[2]["author"] == "model"
        and lines[2]["checkpoint"] == "ckpt"
    )

    response = client.get(f"/loom/{tree.pk}/export/pyloom/")
    assert 'filename="My---tree.pyloom.json"' in response["Content-Disposition"]
    doc = json.loads(body(response))
    root = doc["root"]
    assert root["text"] == "Title line" and [
        c["text"] for c in root["children"][0]["children"]
    ] == [
        " model | bit",
        " other branch",
    ]
    assert root["children"][0]["children"][0]["meta"]["source"] == "AI"
    assert doc["selected_node_id"] == f"weft-{tree.root.pk}"
    assert client.get(f"/loom/{tree.pk}/export/nope/").status_code == 404
