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


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("HTTPError", "an HTTPError"),
        ("LLM", "an LLM"),
        ("SQL", "an SQL"),
        ("SQLite", "an SQLite"),
        ("XMLParser", "an XMLParser"),
        ("MCP", "an MCP"),
        ("RSA", "an RSA"),
        ("S3Client", "an S3Client"),
        ("FFT", "an FFT"),
        ("NaN", "a NaN"),
        ("MySQL", "a MySQL"),
        ("FastAPI", "a FastAPI"),
        ("HTML", "an HTML"),
        ("H", "an H"),
        ("FIFO", "a FIFO"),
    ],
)
def test_an_initialism_said_letter_by_letter_from_a_vowel_sound_takes_an(
    word: str, expected: str
) -> None:
    # F, H, L, M, N, R, S and X are said "eff", "aitch", "ell"...: an initialism that
    # starts with one takes "an" (two capitals, or a capital and a digit); a word does not.
    assert article(word) == expected
