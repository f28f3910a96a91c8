"""A method with a trusted parameter called through a subclass, or through super().

mypy names a method call for the plugin's hooks by the class of the object it is called
on (app.Child.set), which need not define it, and names a call through super() not at
all: an inherited method's LiteralString parameter took any str, and its
TrustedInstruction parameter Any (super().__init__(**kwargs) over Any items).
"""

from typing import Any, LiteralString

from veridic import Composer, TrustedInstruction, instruction


class Base:
    def __init__(self, prompt: TrustedInstruction) -> None:
        Composer().system(prompt)

    def say(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)

    def set(self, prompt: TrustedInstruction) -> None:
        Composer().system(prompt)


class Child(Base):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # E: [veridic-any] Base() got a value of type "Any"

    def again(self, reply: str, loose: Any) -> None:
        # P: [reportArgumentType]
        super().say(reply)  # E: [veridic-literal] Base.say() takes text written in code
        super().set(loose)  # E: [veridic-any] Base.set() got a value of type "Any"
        self.set(loose)  # E: [veridic-any] Base.set() got a value of type "Any"
        super().set(instruction("Be brief."))


class Grandchild(Child):
    pass


class Plain(Base):
    pass


def through_a_subclass(child: Grandchild, reply: str, loose: Any) -> None:
    # P: [reportArgumentType]
    child.say(reply)  # E: [veridic-literal] Base.say() takes text written in code
    child.set(loose)  # E: [veridic-any] Base.set() got a value of type "Any"
    child.set(child.say("Be brief."))
    Grandchild(prompt=loose)  # Child's __init__ takes anything, and passes it on (above)
    Plain(loose)  # E: [veridic-any] got a value of type "Any"
