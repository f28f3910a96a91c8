"""Provider adapters for :class:`~veridic.ModelGateway`: one per provider API.

===========================  ==================================  ===================
adapter                      sends through                       extra
===========================  ==================================  ===================
:class:`OpenAIChat`          ``client.chat.completions.create``  ``veridic[openai]``
:class:`OpenAIResponses`     ``client.responses.create``         ``veridic[openai]``
:class:`AnthropicMessages`   ``client.messages.create``          ``veridic[anthropic]``
:class:`ScriptedProvider`    a script of answers (tests)         none
===========================  ==================================  ===================

Importing this package imports no SDK; an adapter imports its SDK when it is
built, and raises :class:`~veridic.errors.MissingExtraError` naming the extra
when the SDK is not installed. docs/providers.md lists the SDK versions
covered.
"""

from veridic.providers._base import Adapter, Completion, Usage
from veridic.providers._scripted import ScriptedProvider
from veridic.providers.anthropic import AnthropicMessages
from veridic.providers.openai import OpenAIChat, OpenAIResponses

__all__ = [
    "Adapter",
    "AnthropicMessages",
    "Completion",
    "OpenAIChat",
    "OpenAIResponses",
    "ScriptedProvider",
    "Usage",
]
