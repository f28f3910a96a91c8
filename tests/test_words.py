"""The article before a word in a message: chosen by how the word is said, not spelled."""

from __future__ import annotations

import pytest

from veridic._words import article


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("UTF8", "a UTF8"),
        ("URL", "a URL"),
        ("URLs", "a URLs"),
        ("UI", "a UI"),
        ("USB", "a USB"),
        ("UDP", "a UDP"),
        ("once", "a once"),
        ("oneOf", "a oneOf"),
        ("one_of", "a one_of"),
        ("one", "a one"),
    ],
)
def test_a_word_said_with_a_you_or_wuh_sound_takes_a(word: str, expected: str) -> None:
    assert article(word) == expected


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("Unknown", "an Unknown"),
        ("UNSET", "an UNSET"),
        ("Undefined", "an Undefined"),
        ("onerous", "an onerous"),
        ("int", "an int"),
        ("Enum", "an Enum"),
        ("object", "an object"),
        ("UserDict", "a UserDict"),
        ("UUID", "a UUID"),
        ("list", "a list"),
    ],
)
def test_other_words_keep_the_article_their_first_letter_gives(word: str, expected: str) -> None:
    assert article(word) == expected
