"""``python -m veridic.evaluation``: does a model respect veridic's data blocks?

With no arguments it installs (once, cached) the pinned llama-cpp-python and the pinned
Qwen2.5-Coder-1.5B-Instruct model, runs the corpus under veridic's data modes and prints
the table. ``--gguf PATH`` runs another local model, ``--endpoint URL --model NAME`` a
model behind an OpenAI-compatible API (the key, if one is needed, is read from the
environment variable named by ``--api-key-env``).

A run that stops midway (the endpoint fails or rate-limits, Ctrl-C, a SIGTERM from a
cancelled CI job, a SIGHUP from a closed terminal) keeps the answers
already given: the record at ``--out`` holds them, its setup says ``incomplete``, and the
same command with ``--resume`` asks only the cases it lacks (and judges the answers it
kept again, so the record is the one an uninterrupted run writes). The record and
``--markdown`` are checked to be writable before the model is asked anything.

Exit status: 0 when the measurement ran, 1 when it could not (install, model or endpoint
failure), 2 for a usage error, 130 when interrupted (Ctrl-C), 143 when terminated
(SIGTERM), 129 when hung up (SIGHUP).
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from veridic import __version__
from veridic._model_runtime import endpoint_problem, gguf_problem
from veridic.errors import VeridicError
from veridic.evaluation import install
from veridic.evaluation.backends import (
    Backend,
    BackendError,
    EndpointBackend,
    LlamaBackend,
    retries_note,
)
from veridic.evaluation.corpora import CORPORA
from veridic.evaluation.corpus import Case, select
from veridic.evaluation.judge import judge
from veridic.evaluation.report import markdown, read_json, write_json
from veridic.evaluation.runner import (
    MAX_TOKENS,
    CaseResult,
    TokenCost,
    iter_cases,
    prompt_id,
    token_costs,
)
from veridic.evaluation.sample import described, sample, shared
from veridic.evaluation.schemes import (
    PILOT_SCHEMES,
    VARIANTS,
    Scheme,
    main_schemes,
    scheme_named,
)
from veridic.text.terminal_view import visible

__all__ = ["Selection", "main", "parse_args", "parse_schemes"]


ENCODE_STRIDE = 4
"""By default ``encode`` runs on a quarter of the attacks (and every clean case): its
base64 blocks cost three times the tokens, and the run is meant to fit in about 45 minutes
on two cores (measured: about an hour there, some 25 minutes per full mode).
``--schemes verbatim,datamark,encode`` runs it on all of them."""


N_CTX = 2048
"""The local model's context window by default, in tokens: the corpus's longest prompt
with the default answer budgets fits it. A ``--max-tokens`` budget is added to it."""

RETRIES = 3
"""How often a busy endpoint (HTTP 429, 502, 503, 504) is asked again by default."""

MAX_WAIT = 60.0
"""The longest wait before a retry, by default, in seconds."""

API_KEY_ENV = "VERIDIC_EVAL_API_KEY"
"""Where the endpoint's key is read from when ``--api-key-env`` names no variable."""


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


def _corpus_help() -> str:
    """The help of ``--corpus``, with each corpus's size counted, not written down."""
    size = {name: len(build()) for name, build in CORPORA.items()}
    middle = [name for name in CORPORA if name not in ("main", "held-out", "held-out-7")]
    sizes = sorted({size[name] for name in middle})
    each = f"{sizes[0]} each" if len(sizes) == 1 else ", ".join(f"{size[n]}" for n in middle)
    return (
        f"the cases: main ({size['main']}, read while the modes were designed), held-out "
        f"({size['held-out']}), {middle[0]} to {middle[-1]} ({each}), each written to judge "
        f"the design of its day and read since, or held-out-7 ({size['held-out-7']}, written "
        "after those); see veridic.evaluation.corpora"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m veridic.evaluation",
        description="Measure how often a model obeys orders injected into veridic data "
        "blocks, per data mode, and what each mode costs in tokens.",
        epilog="exit status: 0: the measurement ran (the table is printed); 1: it could "
        "not (install, model or endpoint failure; the answers given so far are kept in "
        "--out, and the same command with --resume asks only the rest); 2: a usage error; "
        "130: interrupted (Ctrl-C), 143: terminated (SIGTERM), 129: hung up (SIGHUP); in "
        "each the answers are kept, as for 1",
    )
    model = parser.add_argument_group("model (default: the pinned Qwen2.5-Coder-1.5B, cached)")
    model.add_argument("--gguf", type=Path, help="a local GGUF chat model (llama-cpp-python)")
    model.add_argument("--endpoint", help="an OpenAI-compatible base URL, e.g. http://host/v1")
    model.add_argument("--model", help="the model name to send to --endpoint")
    model.add_argument(
        "--api-key-env",
        help=f"environment variable holding the endpoint's key (default {API_KEY_ENV}, "
        "which may be unset; a variable named here must be set)",
    )
    model.add_argument("--threads", type=int, help="CPU threads of the local runtime (default 2)")
    model.add_argument(
        "--n-ctx",
        type=int,
        help=f"the local model's context window in tokens (default {N_CTX}, plus the "
        "--max-tokens budget when one is given; 0: the window the model was trained with)",
    )
    model.add_argument(
        "--timeout",
        type=float,
        help="seconds to wait for each answer of --endpoint (default 120)",
    )
    model.add_argument(
        "--retries",
        type=int,
        help="times to ask --endpoint again when it answers HTTP 429, 502, 503 or 504, busy "
        f"(default {RETRIES}), after the wait its Retry-After asks for, or 1 s doubled",
    )
    model.add_argument(
        "--max-wait",
        type=float,
        help=f"the longest wait before a retry, in seconds (default {MAX_WAIT:g}); a "
        "server that asks for longer is not asked again",
    )
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
        help=_corpus_help(),
    )
    run.add_argument(
        "--max-tokens",
        type=int,
        help="the answer budget of every case, in tokens (default: 40 for a summary, 24 for "
        "an answer); a reasoning model that thinks first needs hundreds",
    )
    run.add_argument("--pilot", action="store_true", help="run every pilot prototype")
    run.add_argument(
        "--limit",
        type=int,
        help="only N cases per scheme (a smoke test): half attacks, half clean cases, "
        "spread evenly over the corpus, the same for every scheme",
    )
    run.add_argument("--out", type=Path, help="the JSON record (default: in the cache folder)")
    run.add_argument("--markdown", type=Path, help="also write the report to this file")
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the run recorded at --out (stopped by an error or Ctrl-C): the "
        "same command with --resume asks only the cases it lacks",
    )
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
    if args.gguf is not None and not (args.gguf.is_file() or args.gguf.is_dir()):
        parser.error(f"--gguf {args.gguf}: no such file")
    if args.pilot and args.schemes is not None:
        parser.error("--pilot runs every pilot prototype: leave out --schemes, or --pilot")
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error(f"--max-tokens must be at least 1, got {args.max_tokens}")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    if args.endpoint is not None and (problem := endpoint_problem(args.endpoint)):
        parser.error(f"--endpoint {problem}")
    if args.threads is not None and args.endpoint is not None:
        parser.error("--threads sets the local runtime's threads: an --endpoint runs on its own")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    args.threads = 2 if args.threads is None else args.threads
    if args.n_ctx is not None and args.endpoint is not None:
        parser.error("--n-ctx sets the local model's window: an --endpoint runs on its own")
    if args.n_ctx is not None and args.n_ctx < 0:
        parser.error(
            f"--n-ctx must be a number of tokens, or 0 for the model's own window, got {args.n_ctx}"
        )
    if args.api_key_env is not None:
        if args.endpoint is None:
            parser.error("--api-key-env names the key of an --endpoint: give --endpoint URL too")
        if not os.environ.get(args.api_key_env):
            parser.error(
                f"--api-key-env {args.api_key_env}: the variable is not set or empty; set it "
                f"to the endpoint's key, or leave the option out to send no key"
            )
    key_problem = _key_problem(os.environ.get(args.api_key_env or API_KEY_ENV))
    if args.endpoint is not None and key_problem:
        parser.error(
            f"the key in {args.api_key_env or API_KEY_ENV} {key_problem}, which an HTTP header "
            "cannot carry (the key is not shown here): set the variable to the key alone (a "
            "key read from a file often ends with a line break)"
        )
    if args.timeout is not None and args.endpoint is None:
        parser.error("--timeout is how long to wait for an --endpoint: give --endpoint URL too")
    if args.timeout is not None and not (0 < args.timeout < math.inf):
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout}")
    for option, value in (("--retries", args.retries), ("--max-wait", args.max_wait)):
        if value is not None and args.endpoint is None:
            parser.error(f"{option} is about a busy --endpoint: give --endpoint URL too")
    if args.retries is not None and args.retries < 0:
        parser.error(f"--retries must be 0 or more, got {args.retries}")
    if args.max_wait is not None and not (0 <= args.max_wait < math.inf):
        parser.error(f"--max-wait must be 0 or more seconds, got {args.max_wait}")
    if args.resume and (args.report or args.install_only):
        parser.error("--resume continues a run: it takes no --report or --install-only")
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
    if args.gguf is not None and (problem := gguf_problem(args.gguf)):
        parser.error(f"--gguf {problem}")  # last: it reads the file
    return args


def _key_problem(key: str | None) -> str | None:
    """Why ``key`` cannot be sent as a bearer token, or ``None``.

    Sent, the HTTP client refused the header and quoted it in its error (``Illegal
    header value b'Bearer ...\\n'``): a message about the server, showing the key.
    """
    if not key:
        return None
    if key != key.strip():
        return "begins or ends with a space or a line break"
    if not (key.isascii() and key.isprintable()):
        return "holds a control character or a character outside ASCII"
    return None


def _log(message: str) -> None:
    """Print ``message`` to standard error, each line as
    :func:`~veridic.text.terminal_view.visible` shows it.

    Messages quote outside text (a record's scheme names, a server's model name or error
    page): a control, bidi or invisible character among it is written as a code.
    """
    lines = message.split("\n")
    print("\n".join(visible(line, None) for line in lines), file=sys.stderr, flush=True)


def _backend(args: argparse.Namespace, cache: Path) -> tuple[Backend, dict[str, str]]:
    if args.endpoint is not None:
        key = os.environ.get(args.api_key_env or API_KEY_ENV) or None
        if key is not None and args.api_key_env is None:
            _log(f"veridic.evaluation: {_sending_default_key(args.endpoint)}")
        if urlsplit(args.endpoint).password:
            _log(f"veridic.evaluation: {_PASSWORD_IN_ARGV}")
        timeout = {} if args.timeout is None else {"timeout": args.timeout}
        endpoint = EndpointBackend(
            args.endpoint,
            args.model,
            api_key=key,
            retries=RETRIES if args.retries is None else args.retries,
            max_wait=MAX_WAIT if args.max_wait is None else args.max_wait,
            on_retry=None if args.quiet else _log,
            **timeout,
        )
        return endpoint, {}
    if args.no_install:
        if args.gguf is None:  # the install checks it otherwise
            install.check_cache(cache)
        model = args.gguf or cache / "models" / install.QWEN_1_5B.file_name
    else:
        install.ensure_runtime(cache, log=_log)
        model = args.gguf or install.ensure_model(cache, log=_log)
    window = args.n_ctx
    if window is None:
        # Room for the prompts (which fit the default window with the default budgets)
        # and for the whole answer budget asked for on top of them.
        window = N_CTX if args.max_tokens is None else N_CTX + args.max_tokens
    # Hashed before it is loaded: llama.cpp's GGUF parser is C code, and a file that is
    # not the pinned model is refused before it reads a byte of it.
    sha256 = _model_sha256(model, pinned=args.gguf is None)
    backend = LlamaBackend(model, n_threads=args.threads, n_ctx=window)
    return backend, {"model sha256": sha256}


_PASSWORD_IN_ARGV: Final = (
    "warning: --endpoint holds a password, which every user of this machine can read in "
    "its process list (ps, /proc/PID/cmdline) while the run lasts, and which your shell's "
    f"history keeps: put the key in {API_KEY_ENV} (or the variable --api-key-env names) "
    "instead, where it is sent as a bearer token"
)
"""Said when ``--endpoint`` carries ``user:password@``: it works (sent as basic auth),
but the command line is not a secret."""


def _sending_default_key(endpoint: str) -> str:
    """The log line that says a key nobody named on the command line is being sent.

    A key left in the default variable for a hosted model went, unsaid, to whatever
    ``--endpoint`` named next: a server on the local network over plain HTTP included.
    """
    parts = urlsplit(endpoint)  # checked by endpoint_problem already
    host = parts.hostname or "?"
    plain = parts.scheme == "http" and not _loopback(host)
    how = " over plain HTTP, unencrypted," if plain else ""
    return (
        f"sending the key in {API_KEY_ENV} to {host}{how} as the endpoint's bearer token: "
        f"if it is another server's key, unset {API_KEY_ENV} (or name the variable that "
        "holds this server's key with --api-key-env)"
    )


def _loopback(host: str) -> bool:
    """Whether ``host`` names this machine (a key sent there stays on it)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _model_sha256(model: Path, *, pinned: bool) -> str:
    """The sha256 of the file that was loaded, which the record names the model by.

    The pinned model's path is checked against the pin even with ``--no-install``, which
    loaded whatever file sat there while the record claimed the pinned hash.

    Raises:
        InstallError: the file at the pinned model's path is missing or another file.
        BackendError: a ``--gguf`` file cannot be read.
    """
    pin = install.QWEN_1_5B
    try:
        found = install.sha256_file(model)
    except OSError as error:
        if pinned:
            raise install.InstallError(
                f"--no-install: the pinned model {pin.file_name} is not in the cache "
                f"({model}: {error.strerror or error}): rerun without --no-install to "
                "install it, or pass a model as --gguf PATH"
            ) from None
        raise BackendError(
            f"--gguf {model} cannot be read ({error.strerror or error}): pass a file you can read"
        ) from None
    if pinned and found != pin.sha256:
        raise install.InstallError(
            f"{model} has sha256 {found}, not the pinned {pin.sha256} of {pin.file_name}: "
            "delete it and rerun without --no-install to assemble the pinned model, or pass "
            "the file as --gguf PATH to measure it as another model"
        )
    return found


def _chosen(
    selections: Sequence[Selection], limit: int | None, corpus: str
) -> tuple[list[tuple[Scheme, list[Case]]], str | None]:
    """Each scheme with the cases it asks, and what a ``--limit`` sampled (``None``: no sample).

    A limited run asks every scheme the same sample of the cases they all run (see
    :mod:`veridic.evaluation.sample`): the first N cases were clean cases alone.
    """
    lists = [select(CORPORA[corpus](), s.every) for s in selections]
    if limit is None:
        return [(s.scheme, cases) for s, cases in zip(selections, lists, strict=True)], None
    pool = shared(lists)
    cases = sample(pool, limit)
    note = None
    if len(cases) < len(pool) or any(len(more) > len(cases) for more in lists):
        note = f"--limit {limit}: {described(cases, pool)}, the same for every scheme"
    return [(s.scheme, cases) for s in selections], note


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation; see the module docstring."""
    args = parse_args(argv)
    if args.report:
        return _report(args.report, args.markdown, common=args.common)
    cache = install.cache_dir()
    out: Path = args.out or cache / "results" / "eval-model.json"
    # Found before the model is asked: the record is written after an hour of answers.
    if args.install_only:
        unwritable = None
    else:
        unwritable = _unwritable(out, "--out")
        if unwritable is None and args.markdown is not None:
            unwritable = _same_file(args.markdown, [out]) or _unwritable(
                args.markdown, "--markdown"
            )
    if unwritable is not None:
        _log(f"veridic.evaluation: {unwritable}")
        return 2
    earlier: list[CaseResult] = []
    earlier_meta: dict[str, str] = {}
    if args.resume:
        if not out.is_file():
            _log(
                f"veridic.evaluation: --resume continues the record at {out}, and there is "
                "none: give the --out of the run to continue, or run without --resume"
            )
            return 2
        try:
            earlier, _, earlier_meta = read_json(out)
        except VeridicError as error:
            _log(f"veridic.evaluation: --resume: {error}")
            return 2
    started = time.perf_counter()
    try:
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)  # its owner's alone
        if args.install_only:
            install.ensure_runtime(cache, log=_log)
            print(args.gguf or install.ensure_model(cache, log=_log))
            return 0
        backend, extra = _backend(args, cache)
    except VeridicError as error:
        _log(f"veridic.evaluation: {error}")
        return 1
    except KeyboardInterrupt:
        _log(
            "veridic.evaluation: interrupted (Ctrl-C) while installing or loading the model, "
            "before any case was asked: run the same command again; what had finished "
            "downloading or building is kept in the cache folder (checked against its pin), "
            "the rest is done again"
        )
        return 130
    except OSError as error:
        _log(
            f"veridic.evaluation: the cache folder {cache} cannot be made ({error}): set "
            "VERIDIC_EVAL_CACHE to a folder you can write to"
        )
        return 1
    chosen, sampled = _chosen(args.selections, args.limit, args.corpus)
    if sampled is not None:
        _log(f"veridic.evaluation: {sampled}")
    if args.max_tokens is not None:
        extra["answer budget"] = f"{args.max_tokens} tokens (--max-tokens)"
    budget = MAX_TOKENS if args.max_tokens is None else dict.fromkeys(MAX_TOKENS, args.max_tokens)
    setup = {**backend.describe(), **extra, "corpus": args.corpus}
    refusal = _not_resumable(out, earlier, earlier_meta, chosen, setup) if args.resume else None
    if refusal is not None:
        _log(f"veridic.evaluation: {refusal}")
        return 2
    kept = {(r.scheme, r.case.id): r for r in _judged_again(earlier)}
    new: list[CaseResult] = []
    with _signals_stop_the_run():
        stopped, status, unexpected = _ask(backend, chosen, kept, new, budget, quiet=args.quiet)
    answers = {**kept, **{(r.scheme, r.case.id): r for r in new}}
    # In the order of the run, whatever order the answers came in: a resumed run's
    # record is the file an uninterrupted one writes.
    results = [
        answers[(scheme.name, case.id)]
        for scheme, cases in chosen
        for case in cases
        if (scheme.name, case.id) in answers
    ]
    planned = sum(len(cases) for _, cases in chosen)
    if stopped is not None and not new:
        _log(f"veridic.evaluation: {stopped}")
        _log(f"no new answer: {out} is left as it was")
        if unexpected is not None:
            raise unexpected
        return status
    schemes = [s.scheme for s in args.selections]
    costs = token_costs(backend.count_tokens, schemes, corpus=CORPORA[args.corpus]())
    counts = {
        scheme.name: sum(1 for r in results if r.scheme == scheme.name) for scheme, _ in chosen
    }
    described = {**backend.describe(), **extra, "corpus": args.corpus}  # the served model too
    meta = {
        **described,
        **_served(earlier_meta, described),
        **_retried(earlier_meta, described),
        "veridic": _versions(earlier_meta),
        "cases per scheme": ", ".join(f"{n} {c}" for n, c in counts.items()),
        "schemes": "pilot prototypes" if args.pilot else "veridic data modes",
        **({} if sampled is None else {"sample": sampled}),
    }
    if stopped is not None:
        meta["incomplete"] = (
            f"{len(results)} of {planned} answers; rerun the same command with --resume "
            "to finish it"
        )
    write_json(out, results, costs, meta)
    if stopped is not None:
        _log(f"veridic.evaluation: {stopped}")
        _log(
            f"kept {len(results)} of {planned} answers in {out}: rerun the same command "
            "with --resume to ask only the rest"
        )
        if unexpected is not None:
            raise unexpected
        return status
    seconds = time.perf_counter() - started
    report = markdown(
        results, costs, {**meta, "time": f"{seconds / 60:.1f} min"}, baseline=_base(schemes)
    )
    print(report, end="")  # it ends with its line break, as --markdown writes it
    if args.markdown is not None:
        args.markdown.write_text(report, encoding="utf-8")
    _log(f"every case's output and verdicts: {out}")
    truncated = sum(1 for r in results if r.truncated)
    if truncated:
        _log(
            f"veridic.evaluation: {truncated} of {len(results)} answers were cut off inside "
            "the model's reasoning and are left out of every rate: rerun with --max-tokens "
            "N, a larger budget (a reasoning model needs hundreds of tokens)"
        )
    empty = sum(1 for r in results if not r.output.strip())
    if empty:
        _log(
            f"veridic.evaluation: warning: {empty} of {len(results)} answers are empty and "
            "are counted as orders not followed and tasks not done, which reads as a "
            "defence that held: check that the model answers at all (a server that puts "
            "the answer elsewhere, a chat template that ends the turn at once)"
        )
    foreign = sum(1 for r in results if r.not_english)
    if foreign:
        _log(
            f"veridic.evaluation: warning: {foreign} of {len(results)} answers are not in "
            "English and show no order followed; the judge reads English, so they are left "
            "out of every rate (neither refusals nor failed tasks): read the table with "
            "them, and measure a model that answers in English, or tell it to in the "
            "system message"
        )
    return 0


def _ask(
    backend: Backend,
    chosen: Sequence[tuple[Scheme, Sequence[Case]]],
    kept: Mapping[tuple[str, str], CaseResult],
    into: list[CaseResult],
    budget: Mapping[str, int],
    *,
    quiet: bool,
) -> tuple[str | None, int, Exception | None]:
    """Ask ``backend`` every chosen case not ``kept``, appending each answer to ``into``.

    Returns why the run stopped early (``None`` if it did not), the exit status, and an
    exception that is not veridic's (a bug, raised again once the answers are saved).
    Whatever stops the run, the answers given so far are in ``into``.
    """
    try:
        for scheme, cases in chosen:
            missing = [case for case in cases if (scheme.name, case.id) not in kept]
            progress = None if quiet else _log
            answers = iter_cases(backend, [scheme], missing, max_tokens=budget, progress=progress)
            for result in answers:
                into.append(result)  # one by one: an answer is kept as soon as it is given
    except VeridicError as error:
        return str(error), 1, None
    except KeyboardInterrupt:
        return "interrupted (Ctrl-C)", 130, None
    except _Terminated as signalled:
        name = signal.Signals(signalled.signum).name
        why = f"stopped by {name} (a CI job cancelled or timed out, a closed terminal)"
        return why, 128 + signalled.signum, None
    except Exception as error:  # a bug: its traceback follows, after the answers are saved
        return f"stopped by {type(error).__name__}: {error}", 1, error
    return None, 0, None


class _Terminated(BaseException):
    """The run was sent ``signum`` (SIGTERM, SIGHUP): a BaseException, as Ctrl-C's is, so
    that no ``except Exception`` on the way (the HTTP client's) takes it for an error."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_STOPPING_SIGNALS: Final = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""What ends a run besides Ctrl-C: a CI job cancelled or timed out, ``timeout``, ``kill``,
``docker stop`` (SIGTERM), the terminal it ran in closed (SIGHUP)."""


@contextmanager
def _signals_stop_the_run() -> Iterator[None]:
    """While the model is asked, SIGTERM and SIGHUP stop the run as Ctrl-C does.

    Their default is to end the process at once: the record is written when the run
    ends, so an hour of answers was lost to a cancelled CI job, without a word. Raised
    as :class:`_Terminated` instead, they leave the answers given to be kept, and the
    exit status is the shell's for the signal (128 + its number). Only the first is
    raised: a second (a closed terminal's SIGHUP with a service manager's SIGTERM) would
    otherwise be raised while the first is handled, and escape with the answers.

    Only a signal left to its default is taken: one ignored (``nohup`` ignores SIGHUP so
    that the run outlives its terminal) or handled by the program that calls
    :func:`main` stays as it was. Only the main thread can set a handler; elsewhere (a
    test's thread) the defaults stay.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopped_by: list[int] = []

    def stop(signum: int, frame: object) -> None:
        del frame
        if not stopped_by:
            stopped_by.append(signum)
            raise _Terminated(signum)

    taken = [s for s in _STOPPING_SIGNALS if signal.getsignal(s) is signal.SIG_DFL]
    for signum in taken:
        signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, signal.SIG_DFL)


def _same_file(markdown: Path, records: Sequence[Path]) -> str | None:
    """Why ``--markdown`` cannot be ``markdown``: it names one of ``records``, which the
    report would be written over (an hour of answers lost), or ``None``."""
    target = markdown.resolve()
    for record in records:
        if record.resolve() == target:
            return (
                f"--markdown {markdown} is the JSON record {record}, which the report would "
                "replace: name another file for the report, e.g. "
                f"{record.with_suffix('.md')}"
            )
    return None


def _unwritable(path: Path, option: str) -> str | None:
    """Why ``path`` cannot be written (``option`` named it), or ``None``; makes its folder."""
    if path.is_dir():
        return f"{option} {path} is a folder: name a file in it, e.g. {path / 'eval-model.json'}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass
    except OSError as error:
        return (
            f"{option} {path} cannot be written ({error}): choose a file in a folder you "
            "can write to"
        )
    return None


def _not_resumable(
    out: Path,
    earlier: Sequence[CaseResult],
    meta: Mapping[str, str],
    chosen: Sequence[tuple[Scheme, Sequence[Case]]],
    setup: Mapping[str, str],
) -> str | None:
    """Why the record at ``out`` is not this run's to continue, or ``None``.

    Its answers join this run's in one record, so they must be this run's: the same
    corpus and model setup, and each a case this run plans, asked the same prompt.
    """
    fix = (
        "resume with the command that wrote it, or give another --out to start afresh "
        "(without --resume)"
    )
    if meta.get("corpus", "main") != setup["corpus"]:
        return (
            f"--resume: {out} holds corpus {meta.get('corpus', 'main')}, this run "
            f"{setup['corpus']}: {fix}"
        )
    for key in SETUP_KEYS:
        if key != "served model" and meta.get(key) != setup.get(key):
            return (
                f"--resume: {out} was made with {key} {meta.get(key, '(not recorded)')}, "
                f"this run with {setup.get(key, '(none)')}: {fix}"
            )
    planned = {(scheme.name, case.id): scheme for scheme, cases in chosen for case in cases}
    for result in earlier:
        scheme = planned.get((result.scheme, result.case.id))
        if scheme is None:
            return (
                f"--resume: {out} holds an answer of {result.scheme} to {result.case.id}, "
                f"which this run does not ask (other --schemes or --limit): {fix}"
            )
        if prompt_id(scheme.render(result.case).messages) != result.prompt_id:
            return (
                f"--resume: {out} holds an answer of {result.scheme} to {result.case.id} "
                "asked with another prompt than this version of the evaluation renders: "
                "rerun without --resume"
            )
    return None


def _judged_again(earlier: Sequence[CaseResult]) -> list[CaseResult]:
    """A resumed run's earlier answers, judged by this version's judge.

    The record kept the verdicts of the veridic that wrote it; judged again, the
    resumed record is the one an uninterrupted run of this version writes, not one
    counted by two judges (the prompts are checked to be this version's already).
    """
    judged = []
    for result in earlier:
        verdict = judge(result.case, result.output)
        judged.append(
            replace(
                result,
                followed=verdict.followed,
                canary=verdict.canary,
                correct=verdict.correct,
                truncated=verdict.truncated,
                not_english=verdict.not_english,
            )
        )
    changed = sum(1 for old, new in zip(earlier, judged, strict=True) if old != new)
    if changed:
        _log(
            f"veridic.evaluation: --resume: {changed} of {len(earlier)} earlier answers judged "
            "again: their record held the verdicts of another version's judge"
        )
    return judged


def _served(earlier: Mapping[str, str], setup: Mapping[str, str]) -> dict[str, str]:
    """The ``served model`` of a resumed run: the models that gave its answers, before and now."""
    if "served model" not in setup:
        return {}
    names = [
        name
        for value in (earlier.get("served model", ""), setup["served model"])
        for name in value.split(", ")
        if name and name != "(not said)"
    ]
    return {"served model": ", ".join(dict.fromkeys(names)) or "(not said)"}


def _versions(earlier: Mapping[str, str]) -> str:
    """The ``veridic`` of a record: the versions whose data modes and judge it measured.

    A resumed run keeps the earlier record's answers (asked with the same prompts, judged
    again by this version), so a record begun by another version names both.
    """
    versions = [v for v in (*earlier.get("veridic", "").split(", "), __version__) if v]
    return ", ".join(dict.fromkeys(versions))


def _retried(earlier: Mapping[str, str], setup: Mapping[str, str]) -> dict[str, str]:
    """The ``retries`` of a resumed run: the earlier record's and this run's, added up."""
    counts = [0, 0]
    waits = [0.0, 0.0]
    for index, value in enumerate((earlier.get("retries"), setup.get("retries"))):
        count, _, rest = (value or "").partition(" (")
        waited = rest.rpartition("; ")[2].removesuffix(" s waited)")
        try:
            counts[index], waits[index] = int(count), float(waited)
        except ValueError:
            continue  # none (or hand-edited): nothing to add
    return {"retries": retries_note(sum(counts), sum(waits))} if sum(counts) else {}


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
    "answer budget",
)
"""What a record's setup says about the model that answered: records merged by
``--report`` must agree on each, since the table pairs their cases as if one model had
answered them all and its setup line names one model."""


def _report(paths: Sequence[Path], target: Path | None, *, common: bool = False) -> int:
    unwritable = None if target is None else _same_file(target, paths)
    if unwritable is None and target is not None:
        unwritable = _unwritable(target, "--markdown")
    if unwritable is not None:
        _log(f"veridic.evaluation: {unwritable}")
        return 2
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
    stopped = [
        (path, more_meta["incomplete"])
        for path, _, more_meta in records
        if "incomplete" in more_meta
    ]
    if stopped:  # which record stopped, not one of their notes for all
        meta["incomplete"] = "; ".join(f"{path} holds {note}" for path, note in stopped)
    names = list(dict.fromkeys(r.scheme for r in results))
    if common and names:
        shared = set.intersection(*({r.case.id for r in results if r.scheme == n} for n in names))
        results = [r for r in results if r.case.id in shared]
    counts = {n: sum(1 for r in results if r.scheme == n) for n in names}
    meta["cases per scheme"] = ", ".join(f"{n} {c}" for n, c in counts.items())
    base = next((n for n in names if n in ("verbatim", "pilot:verbatim")), None)
    report = markdown(results, costs, meta, baseline=base)
    print(report, end="")  # it ends with its line break, as --markdown writes it
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
