"""errors.plain_text answers printable ASCII at once (a plan checks every note and name it prints); it must say what
the character-by-character rule says for any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from generator.errors import plain_text, prints_as_itself


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_plain_text_is_every_character_printing_as_itself(text):
    assert plain_text(text) is all(map(prints_as_itself, text))


def test_what_the_fast_path_must_not_pass():
    assert plain_text("a\tb") is False  # ASCII, but a control character
    assert plain_text("soft\u00adhyphen") is False  # printable to str.isprintable(), but drawn as nothing
    assert plain_text("caf\u00e9 7B") is True
    assert plain_text("") is True
