"""A word with its article, for a message that says what was found instead.

"untrusted() got a int" reads as a typo, and a reader starts to doubt the rest of
the message. The article is chosen from the word's spelling: ``an`` before a vowel
(``an int``, ``an Enum``, ``an assistant message``), ``a`` before a ``u`` or ``eu``
said as "you" (``a UUID``, ``a UserDict``, ``a URL``) and before ``one`` and
``once``; ``an`` before an initialism said from a vowel sound (``an HTTPError``,
``an LLM``, ``an SQL``). ``None`` is no type to a reader: it is said as itself.

It sits at the bottom because the text core, the templates and the checks all use it.

>>> a_type(3), a_type([]), a_type(None), a_type(1.5), a_type(object())
('an int', 'a list', 'None', 'a float', 'an object')
>>> article("assistant"), article("UUID"), article("Unknown"), article("Enum")
('an assistant', 'a UUID', 'an Unknown', 'an Enum')
>>> article("UTF8"), article("URL"), article("oneOf"), article("HTTPError")
('a UTF8', 'a URL', 'a oneOf', 'an HTTPError')
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["a_type", "article"]

_SAID_YOU: Final = re.compile(
    r"(?i:u[bcfgklmnprstvz][aeiouy]|uu|eu|uni|use|usu)"
    r"|(?i:on(?:e|ce))(?![a-z])"  # case-sensitive lookahead: oneOf, not onerous
    r"|U(?:TF|RL|RI|DP|SB|TC|I|X)s?(?![a-z])"
)
"""A start said with a consonant though spelled with a vowel: ``UserDict``, ``UUID``, ``Euro``,
``one`` and ``once`` (also as the head of a name: ``oneOf``, ``one_of``), and the common
initialisms said letter by letter from a "you": ``UTF8``, ``URL``, ``UI``.

Not ``Unknown``, ``Undefined``, ``UNSET`` (``un`` + consonant), ``onerous``: those take ``an``.
"""


_SAID_FROM_A_VOWEL: Final = re.compile(r"[FHLMNRSX](?:[B-DF-HJ-NP-TV-Z0-9]|(?![A-Za-z]))")
"""An initialism said letter by letter from a letter whose name starts with a vowel ("eff",
"aitch", "ell", "em", "en", "ar", "ess", "ex"): ``HTTPError``, ``LLM``, ``SQL``, ``S3``, ``X``.
A capital followed by a vowel is read as a word (``FIFO``, ``NaN``, ``MySQL``): ``a``."""


def article(word: str) -> str:
    """``word`` with ``a`` or ``an`` before it, chosen from its spelling."""
    vowel = word[:1].lower() in set("aeiou") and not _SAID_YOU.match(word)
    return f"{'an' if vowel or _SAID_FROM_A_VOWEL.match(word) else 'a'} {word}"


def a_type(value: object) -> str:
    """The type of ``value`` with its article (``an int``), or ``None`` for None."""
    if value is None:
        return "None"
    return article(type(value).__name__)
