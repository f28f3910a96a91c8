"""A second read of the ninth review of the run loop and the executor: what a handler may
return. Each test goes through the public API and failed on the code before its fix."""

from __future__ import annotations

import typing

from veridic import Registry

UserId = typing.NewType("UserId", str)


def test_a_handler_may_return_type_hints_which_are_data_as_a_class_is() -> None:
    """``list[int]``, ``Optional[str]``, ``Literal[...]`` and a ``NewType`` are callable
    (calling one builds a value, as a class does), and a tool that describes a signature
    returns them from ``typing.get_type_hints``: they were refused as callbacks, while
    ``int`` beside them was data."""
    registry = Registry()

    def resize(
        sizes: list[int],
        label: typing.Optional[str],  # noqa: UP045 - the typing form is the case
        owner: UserId,
        mode: typing.Literal["fit", "fill"],
    ) -> int:
        return len(sizes)

    @registry.tool(kind="query")
    def signature(name: str) -> dict[str, object]:
        """The parameter types of a function of the image library.

        Args:
            name: The function's name.
        """
        return dict(typing.get_type_hints(resize))

    hints = registry.view().dispatch("signature", {"name": "resize"})
    assert hints == typing.get_type_hints(resize)
