"""``veridic probe``: the one registry command that asks a real model.

Its arguments name the model (an endpoint or a local GGUF file) and are checked
before the application is imported, so a wrong flag costs neither an import
nor a model load; what it finds is reported as lint's findings are.
"""

from __future__ import annotations

import argparse
import os

from veridic._counted import counted
from veridic._model_runtime import endpoint_problem, gguf_problem
from veridic.checks._cli_config import _Config
from veridic.checks._cli_registry import _lint_item
from veridic.checks._cli_report import _Report, _UsageError
from veridic.checks._cli_target import _booting, _load_target
from veridic.checks.choosers import (
    CachedChooser,
    ChoiceCache,
    EndpointChooser,
    LlamaChooser,
    ProbeModelError,
    ToolChooser,
    default_cache_dir,
)
from veridic.checks.probe import ProbeError, findings, probe, read_requests
from veridic.errors import VeridicError


def _run_probe(args: argparse.Namespace, config: _Config) -> _Report:
    """``veridic probe``: ask the model (:mod:`veridic.checks.probe`); findings as lint's."""
    _check_probe_args(args)
    try:
        requests = None if args.requests is None else read_requests(args.requests)
    except ProbeError as error:
        raise _UsageError(str(error)) from error
    report = _Report("probe", args.target)
    with _booting(report):
        target = _load_target(args.target)
        chooser = _probe_chooser(args)
        try:
            result = probe(
                target,
                chooser,
                requests=requests,
                requests_source=f"requests file {args.requests}",
                per_tool=args.per_tool,
                hide=args.hide,
            )
        except ProbeError as error:
            raise _UsageError(str(error)) from error
        except ProbeModelError as error:
            raise _UsageError(f"the model could not be asked: {error}") from error
        found = findings(result, threshold=args.threshold, siblings=config.siblings)
        report.items.extend(_lint_item(finding) for finding in found)
        model = ", ".join(f"{k} {v}" for k, v in result.model)
        report.notes.append(f"model: {model}")
        asked = len(result.asked)
        if isinstance(chooser, CachedChooser):
            report.notes.append(
                f"{counted(asked, 'request')}: {chooser.asked} asked, {chooser.reused} answered "
                "from the cache"
            )
            report.extra["cache"] = {"asked": chooser.asked, "reused": chooser.reused}
        else:
            report.notes.append(f"{counted(asked, 'request')}, all asked (--no-cache)")
        report.notes.extend(result.summary())
        report.extra.update(result.to_json())
    return report


def _check_probe_args(args: argparse.Namespace) -> None:
    if args.endpoint is not None and args.gguf is not None:
        raise _UsageError("--endpoint and --gguf name two models: choose one")
    if args.endpoint is None and args.gguf is None:
        raise _UsageError(
            "no model to ask: pass --endpoint URL --model NAME (an OpenAI-compatible API) or "
            "--gguf PATH (a local model; `python -m veridic.evaluation --install-only` "
            "installs the pinned Qwen2.5-Coder-1.5B and prints its path; `make eval-probe` "
            "does both)"
        )
    if args.endpoint is not None and (problem := endpoint_problem(args.endpoint)):
        raise _UsageError(f"--endpoint {problem}")
    if args.endpoint is not None and not args.model:
        raise _UsageError("--endpoint needs --model NAME, the model the endpoint should run")
    if args.model is not None and args.endpoint is None:
        raise _UsageError("--model names a model of an endpoint: give --endpoint URL too")
    if args.gguf is not None and (problem := gguf_problem(args.gguf)):
        raise _UsageError(f"--gguf {problem}")  # each reason says what to pass instead
    if not 0 < args.threshold <= 1:
        raise _UsageError(
            f"--threshold {args.threshold:g}: the confusion rate at which a pair fails is a "
            "share in (0, 1], e.g. 0.2"
        )
    if args.per_tool is not None and args.per_tool < 1:
        raise _UsageError(f"--per-tool {args.per_tool}: ask at least one request per tool")
    if args.threads < 1:
        raise _UsageError(f"--threads {args.threads}: use at least one thread")
    if args.no_cache and args.cache is not None:
        raise _UsageError("--cache DIR and --no-cache contradict each other: choose one")


def _probe_chooser(args: argparse.Namespace) -> ToolChooser:
    """The model to ask, behind the answer cache unless ``--no-cache``."""
    chooser: ToolChooser
    try:
        if args.endpoint is not None:
            key = os.environ.get(args.api_key_env) or None
            chooser = EndpointChooser(args.endpoint, args.model, api_key=key)
        else:
            chooser = LlamaChooser(args.gguf, n_threads=args.threads)
    except (VeridicError, ValueError) as error:
        # A missing extra, a model without a tool template, an api-version that reads as no
        # version (the message does not repeat it).
        raise _UsageError(str(error)) from error
    if args.no_cache:
        return chooser
    return CachedChooser(chooser, ChoiceCache(args.cache or default_cache_dir()))
