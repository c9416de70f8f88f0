"""Tokens are aligned to the text, not required to equal it: a node whose tokens end
with the model's stop token keeps its colours and alternatives, a stop string that
cut the last token short keeps it, and an edited text keeps the colours of what
is unchanged."""

import pytest

from core.tokens import chips_for, text_before
from loom.models import Author
from tests.kit.conftest import logprobs_for

pytestmark = pytest.mark.django_db


def test_it_keeps_colours_when_the_stop_token_ends_the_tokens():
    lp = logprobs_for([" Hello", " world", "<|im_end|>"], [0.5, 0.05, 0.9])
    chips = chips_for(" Hello world", lp)
    assert [(c.text, c.in_text, c.bin) for c in chips] == [
        (" Hello", True, 0),
        (" world", True, 2),
        ("<|im_end|>", False, 0),
    ]
    assert (" world", 0.05, True) in chips[1].alternatives
    assert chips[2].alternatives[0] == ("<|im_end|>", 0.9, True)


def test_it_keeps_a_last_token_cut_by_a_stop_string():
    chips = chips_for(" one two", logprobs_for([" one", " two\n\n"], [0.5, 0.2]))
    assert [c.text for c in chips] == [" one", " two"]
    assert chips[1].bin == 1


def test_it_colours_what_an_edit_left_unchanged():
    chips = chips_for(
        " Hello there, friend", logprobs_for([" Hello", " world", "!"], [0.5, 0.5, 0.5])
    )
    assert [(c.text, c.bin) for c in chips] == [(" Hello", 0), (" there, friend", None)]


def test_it_shows_a_loom_node_ending_with_the_stop_token_in_colour(client, make_tree):
    tree = make_tree(prompt="Once")
    lp = logprobs_for([" upon", " a", " time", "<|im_end|>"], [0.6, 0.2, 0.04, 0.9])
    node = tree.root.add_child(" upon a time", author=Author.MODEL, logprobs=lp)
    client.force_login(tree.owner)
    html = client.get(f"/loom/{tree.pk}/n/{node.pk}/").content.decode()
    assert 'class="tok p0" data-in tabindex="0" data-i="0"' in html
    assert 'class="tok p1" data-in tabindex="0" data-i="1"' in html
    assert 'class="tok p2" data-in tabindex="0" data-i="2"' in html
    assert "&lt;|im_end|&gt;</span>" in html  # shown as a muted extra, escaped
    assert 'class="tok-legend' in html

    # Branching at " time" takes the text before it, then the alternative.
    assert text_before(node.text, lp, 2) == " upon a"
    response = client.post(
        f"/loom/{tree.pk}/n/{node.pk}/alternative/", {"index": "2", "token": "<alt>"}
    )
    assert response.status_code in (200, 302)
    assert tree.root.children().filter(text=" upon a<alt>").exists()


def test_it_colours_every_model_segment_of_the_path(client, make_tree):
    tree = make_tree(prompt="Once")
    first = tree.root.add_child(
        " upon", author=Author.MODEL, logprobs=logprobs_for([" upon"], [0.05])
    )
    human = first.add_child(" a")
    last = human.add_child(" time", author=Author.MODEL, logprobs=logprobs_for([" time"], [0.5]))
    client.force_login(tree.owner)
    html = client.get(f"/loom/{tree.pk}/n/{last.pk}/").content.decode()
    assert f'data-id="{first.pk}" data-branch="loom"' in html  # an ancestor, in colour
    assert '<span class="tok p2" data-in tabindex="0" data-i="0"' in html
    assert (
        f'id="current-seg" data-branch="loom" data-branch-url="/loom/{tree.pk}/n/{last.pk}/alternative/"'
        in html
    )
