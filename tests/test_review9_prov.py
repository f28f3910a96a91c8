"""A ninth review of the provider adapters and the gateway's send path.

Each test drives the real SDKs over a fake transport (``tests/_sdk_server.py``) or the
gateway with a :class:`~veridic.providers.ScriptedProvider`; each failed on the code before
its fix.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from test_providers import VIEW, first_prompt, gateway

from veridic import OpenAIChat, OpenAIResponses, VeridicError
from veridic.providers import _base

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


# --- tool_choice is refused once per send ---------------------------------------------------


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Count the runs of the refusal of unsent tool choices (the real function still runs)."""
    seen: list[object] = []
    real = _base._refuse_unsent_choice

    def counting(adapter: _base.Adapter, choice: object, where: str) -> None:
        seen.append(choice)
        real(adapter, choice, where)

    monkeypatch.setattr(_base, "_refuse_unsent_choice", counting)
    return seen


def test_a_tool_choice_is_checked_once_per_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's check of the call's options and the gateway's reading of the choice
    each refused an unsent choice: the same check ran twice on every send."""
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    seen = _counted(monkeypatch)
    choice = {"type": "function", "function": {"name": "get_weather"}}
    gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert seen == [choice]


@pytest.mark.parametrize("where", ["adapter", "call"])
def test_a_hosted_tool_choice_is_still_refused_before_anything_is_sent(where: str) -> None:
    server = FakeServer(http_module("openai"), [])
    choice = {"type": "web_search_preview"}
    client = server.client(openai, "OpenAI")
    if where == "adapter":
        with pytest.raises(VeridicError, match="web_search_preview"):
            OpenAIResponses(client, model="gpt-test", options={"tool_choice": choice})
        return
    gw, calls, _ = gateway(OpenAIResponses(client, model="gpt-test"))
    with pytest.raises(VeridicError, match="web_search_preview"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.sent == []
    assert calls.records() == ()


def _chat_answer() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Sunny."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


# --- a preset key: OpenRouter's edits the prompt, text-generation-webui's sets sampling -----


def test_a_preset_key_is_refused_for_any_server_with_the_sampling_options_to_pass_instead() -> None:
    """text-generation-webui reads ``preset`` as sampling settings only, but the adapter
    cannot see whether a proxy in front of the server passes the key on to OpenRouter, which
    reads it as a stored system prompt and server tools: the key stays refused for every
    server, and the refusal now names what a text-generation-webui user passes instead."""
    http = http_module("openai")
    server = FakeServer(http, [])
    client = openai.OpenAI(
        api_key="k",
        base_url="http://127.0.0.1:5000/v1",
        http_client=http.Client(transport=http.MockTransport(server.handle)),
    )
    with pytest.raises(VeridicError, match=r"preset") as caught:
        OpenAIChat(client, model="local", options={"extra_body": {"preset": "min_p"}})
    message = str(caught.value)
    assert "OpenRouter" in message
    assert "text-generation-webui" in message and "temperature" in message
