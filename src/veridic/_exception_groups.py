"""The errors an exception group holds: the executor reads a handler's, the MCP client its SDK's.

One walk for both, with a stack rather than recursion: groups nested past the recursion
limit (or a subclass whose ``exceptions`` holds itself) must not turn reading an error
into a second, bare one.
"""

from __future__ import annotations


def leaves(error: BaseException) -> list[BaseException]:
    """The errors ``error`` holds, its inner groups opened, in order; ``[error]`` for one
    that is not a group.

    >>> inner = ExceptionGroup("h", [KeyError("b")])
    >>> [str(e) for e in leaves(ExceptionGroup("g", [ValueError("a"), inner]))]
    ['a', "'b'"]
    """
    found: list[BaseException] = []
    stack, opened = [error], set[int]()
    while stack:
        item = stack.pop()
        if not isinstance(item, BaseExceptionGroup):
            found.append(item)
        elif id(item) not in opened:
            opened.add(id(item))
            stack.extend(reversed(item.exceptions))
    return found
