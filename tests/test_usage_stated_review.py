"""A second read of ``Usage.stated``: what an application's own adapter may give, and what a
paused run keeps of it. Each test failed before its fix."""

from __future__ import annotations

import dataclasses

import pytest
from test_providers import VIEW, first_prompt

from veridic import ModelCallRecord, ModelGateway, ScriptedProvider, SQLiteAuditSink, VeridicError
from veridic.providers import Completion, Usage


class _CallsOnly:
    """A model-call sink that keeps the calls, not the answers: no record checks the usage."""

    def write_model_call(self, record: ModelCallRecord, /) -> None:
        del record


def _stating(stated: object) -> type[ScriptedProvider]:
    class OwnAdapter(ScriptedProvider):
        """An application's own adapter that fills ``stated`` wrong."""

        def parse(self, response: object) -> Completion:
            completion = super().parse(response)
            usage = Usage(100, 5, stated=stated)  # type: ignore[arg-type]  # the adapter's bug
            return dataclasses.replace(completion, usage=usage)

    return OwnAdapter


_BAD_STATED = [
    ["cache_read_input_tokens"],
    "cache_read_input_tokens",
    frozenset({"input_tokens"}),
    {"cache_read_input_tokens"},
]


@pytest.mark.parametrize("stated", _BAD_STATED, ids=repr)
@pytest.mark.parametrize("answers", ["recorded", "not recorded"])
def test_the_gateway_refuses_an_own_adapters_stated_that_is_not_a_frozenset_of_part_names(
    stated: object, answers: str
) -> None:
    audit = SQLiteAuditSink(":memory:")
    provider = _stating(stated)([{"text": "ok"}])
    gateway = (
        ModelGateway(provider, audit=audit)
        if answers == "recorded"
        else ModelGateway(provider, audit=audit, calls=_CallsOnly())
    )
    with pytest.raises(VeridicError) as refused:
        gateway.send(first_prompt(), VIEW, request_id="req-1")
    said = str(refused.value)
    assert said.startswith("the answer to request 'req-1' gives a usage whose stated is ")
    assert "an adapter of your own must give None or a frozenset of" in said
    if answers == "recorded":  # the answer is on record, without its usage, as for a bad count
        (answer,) = audit.model_replies("req-1")
        assert answer.usage is None
