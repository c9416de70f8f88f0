"""Prompt assembly (loom/context.py, a pure function): the memory before the path on
lines of its own, the author's note a number of newlines before the end (as a line of
its own) or a number of tokens before it (exactly there, as written), and nothing added
when both are empty."""

from loom.context import Context, assemble, newline_offset

PATH = "Chapter one\nThe rain fell.\nShe waited.\nThe door opened"


def words(text: str, n: int) -> int:
    """A made-up tokenizer: each word with its leading space is a token."""
    import re

    starts = [m.start() for m in re.finditer(r"\s*\S+", text)]
    return starts[-n] if n <= len(starts) else 0


def test_it_changes_nothing_without_memory_or_note():
    assert assemble(PATH, Context()) == PATH
    assert assemble(PATH, Context(depth=5, unit="tokens"), cut=words) == PATH
    assert assemble("", Context()) == ""


def test_it_puts_the_memory_first_on_lines_of_its_own():
    assert assemble(PATH, Context(memory="Genre: mystery")) == "Genre: mystery\n" + PATH
    assert assemble(PATH, Context(memory="Cast:\n- Ana\n")) == "Cast:\n- Ana\n" + PATH


def test_it_places_the_note_by_newlines():
    note = "[Style: terse]"
    # 1 newline before the end: between the last two lines.
    assert assemble(PATH, Context(note=note, depth=1)) == (
        "Chapter one\nThe rain fell.\nShe waited.\n[Style: terse]\nThe door opened"
    )
    assert assemble(PATH, Context(note=note, depth=3)) == (
        "Chapter one\n[Style: terse]\nThe rain fell.\nShe waited.\nThe door opened"
    )
    # Deeper than the text has lines: at its start (after the memory).
    assert assemble(PATH, Context(memory="M", note=note, depth=9)) == "M\n[Style: terse]\n" + PATH
    # 0: after the text, on a line of its own.
    assert assemble(PATH, Context(note=note, depth=0)) == PATH + "\n[Style: terse]\n"
    assert assemble("Done.\n", Context(note=note + "\n", depth=0)) == "Done.\n[Style: terse]\n"


def test_it_places_the_note_by_tokens_exactly():
    ctx = Context(note=" [dark]", depth=2, unit="tokens")
    assert assemble(PATH, ctx, cut=words) == (
        "Chapter one\nThe rain fell.\nShe waited.\nThe [dark] door opened"
    )
    assert assemble("a b", Context(note="N", depth=5, unit="tokens"), cut=words) == "Na b"
    # Depth 0, or no tokenizer to count with: at the end.
    assert assemble("a b", Context(note="N", depth=0, unit="tokens"), cut=words) == "a bN"
    assert assemble("a b", Context(note="N", depth=1, unit="tokens")) == "a bN"
    # A tokenizer's answer out of range is kept inside the text.
    assert assemble("a b", Context(note="N", depth=1, unit="tokens"), cut=lambda t, n: 99) == "a bN"


def test_it_counts_newlines_from_the_end():
    assert newline_offset("a\nb\nc", 0) == 5
    assert newline_offset("a\nb\nc", 1) == 4
    assert newline_offset("a\nb\nc", 2) == 2
    assert newline_offset("a\nb\nc", 3) == 0
    assert newline_offset("", 2) == 0


def test_it_keeps_and_reads_back_what_a_generation_used():
    ctx = Context(memory="M", note="N", depth=2, unit="tokens")
    assert Context.from_record(ctx.record()) == ctx
    assert Context().record() is None
    assert Context.from_record({"depth": -4, "unit": "lines", "memory": 7}) == Context(memory="7")
