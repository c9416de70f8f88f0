"""The pure maths of inspector.scoring against hand-made vLLM prompt_logprobs."""

import math

import pytest

from inspector import scoring

# "<s> The cat": position 1 has the actual token inside the top 2, position 2 outside.
PLP = [
    None,
    {"5": {"logprob": -0.5, "rank": 1, "decoded_token": " The"},
     "9": {"logprob": -1.5, "rank": 2, "decoded_token": " A"}},
    {"7": {"logprob": -6.0, "rank": 40, "decoded_token": " cat"},
     "3": {"logprob": -0.2, "rank": 1, "decoded_token": " dog"},
     "4": {"logprob": -2.0, "rank": 2, "decoded_token": " owl"}},
]  # fmt: skip


def test_it_reads_ids_logprobs_and_ranks_from_each_position():
    rows = scoring.rows_from_prompt_logprobs(PLP, k=2)
    assert [r.id for r in rows] == [None, 5, 7]
    assert [r.logprob for r in rows] == [None, -0.5, -6.0]
    assert [r.rank for r in rows] == [None, 1, 40]
    assert rows[2].bits == pytest.approx(6.0 / math.log(2))
    assert rows[2].delta_top1 == pytest.approx(-5.8)
    # The actual token is outside the top 2 there: the card lists the 2 best only.
    assert [a.id for a in rows[2].top] == [3, 4]
    assert not rows[2].in_top
    assert rows[1].in_top


def test_it_summarises_only_the_scored_positions():
    s = scoring.summarise(scoring.rows_from_prompt_logprobs(PLP, k=2))
    assert (s.tokens, s.scored) == (3, 2)
    assert s.total_logprob == pytest.approx(-6.5)
    assert s.mean_logprob == pytest.approx(-3.25)
    assert s.perplexity == pytest.approx(math.exp(3.25))
    assert s.bits_per_token == pytest.approx(3.25 / math.log(2))


def test_it_labels_the_first_position_from_tokenize_even_with_an_extra_bos():
    rows = scoring.build_rows(PLP, tokenized=[0, 2, 5, 7], prompt_text="X The cat", k=2)
    # /tokenize added a BOS (0) the completion did not have: the tail still matches.
    assert rows[0].id == 2
    assert rows[0].text == "X"
    assert not rows[0].special
    bos = scoring.build_rows(PLP, tokenized=[2, 5, 7], prompt_text=" The cat", k=2)
    assert bos[0].id == 2 and bos[0].special
    unknown = scoring.build_rows(PLP, tokenized=[1, 2, 3, 4], prompt_text="?", k=2)
    assert unknown[0].id is None


def test_it_computes_entropy_and_exact_rank_over_the_full_vocabulary():
    lps = [math.log(p) for p in (0.5, 0.25, 0.125, 0.125)]
    entries = {
        str(i): {"logprob": lp, "rank": 0, "decoded_token": f"t{i}"} for i, lp in enumerate(lps)
    }
    # The actual token (3) comes first, as vLLM sends it; -9999.0 stands for p = 0.
    plp = [
        None,
        {"3": entries["3"], **entries, "4": {"logprob": -9999.0, "rank": 5, "decoded_token": "z"}},
    ]
    row = scoring.rows_from_prompt_logprobs(plp, full_vocab=True)[1]
    assert row.id == 3
    assert row.entropy_bits == pytest.approx(1.75)
    # Tied with token 2: vLLM's rank counts only strictly better tokens.
    assert row.rank == 3
    assert [a.id for a in row.top][:3] == [0, 1, 2]


@pytest.mark.parametrize(
    ("rank", "bucket"), [(1, 0), (10, 0), (11, 1), (100, 1), (1000, 2), (1001, 3)]
)
def test_it_buckets_ranks_like_gltr(rank, bucket):
    assert scoring.rank_bucket(rank) == bucket


def test_it_buckets_relative_and_delta_colours():
    assert scoring.rel_bucket(0.0) == 0
    assert scoring.rel_bucket(-0.5) == 1
    assert scoring.rel_bucket(-30.0) == 5
    assert scoring.delta_bucket(-3.0) == 0
    assert scoring.delta_bucket(0.0) == 2
    assert scoring.delta_bucket(3.0) == 4


def test_it_finds_the_actual_tokens_when_key_order_is_lost():
    # jsonb sorts keys: the actual token is no longer first. k + 1 entries mean the
    # worst-ranked is the actual one; with k entries the text decides.
    shuffled = [None, dict(reversed(list(PLP[1].items()))), dict(reversed(list(PLP[2].items())))]
    assert scoring.guess_actual_ids(shuffled, text="X The cat", k=2) == [None, 5, 7]
    assert scoring.guess_actual_ids(shuffled, text=None, k=2)[2] == 7
    rows = scoring.build_rows(shuffled, prompt_text="X The cat", k=2)
    assert [r.id for r in rows] == [None, 5, 7]
    assert rows[0].text == "X"
