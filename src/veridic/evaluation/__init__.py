"""Does a model respect veridic's data blocks? A measurement, run with ``make eval-model``.

The evaluation places documents that carry injected orders into prompts, one per data
mode, runs a real model on them with greedy decoding, and reports how often the model
obeyed the injection, how often it still did the real task, and what each mode costs in
tokens. It runs against the cached local model by default, against any GGUF file
(``--gguf PATH``) or against an OpenAI-compatible endpoint (``--endpoint URL --model NAME``):
``python -m veridic.evaluation --help``.

Modules, one concern each: ``install`` (the pinned runtime and model, cached),
``corpus`` (documents, orders, placements), ``schemes`` (how a data block is shown to the
model in each mode, veridic's own and the pilot prototypes), ``judge`` (deterministic
verdicts on an output), ``statistics`` (Wilson intervals, exact McNemar tests),
``backends`` (llama-cpp-python, OpenAI-compatible HTTP), ``runner`` (cases to results),
``sample`` (the cases of a ``--limit`` run), ``report`` (the table and the JSON record)
and ``cli``.
"""

from __future__ import annotations
