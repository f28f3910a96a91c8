"""The models the evaluation can run: a local GGUF file, or an OpenAI-compatible endpoint.

Both decode greedily (temperature 0, a fixed seed), so a rerun on the same runtime gives
the same outputs. Their dependencies are imported lazily: ``llama_cpp`` for
:class:`LlamaBackend` (``python -m veridic.evaluation`` installs it), ``httpx`` for
:class:`EndpointBackend`.

Message contents reach the local model as *text*: the chat template's own markup is
tokenised with special tokens, each message's content without them, so a ``<|im_end|>``
written inside a document is the characters, not the control token. That is what a
hosted API does. (llama-cpp-python's own ``create_chat_completion`` tokenises the whole
rendered prompt with special tokens on, so there a document can end its turn for real;
no data mode can defend against that, it is the serving stack's job.)
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Final, Protocol, cast
from urllib.parse import urljoin

from veridic._model_runtime import (
    HttpClient,
    HttpResponse,
    LlamaModel,
    chat_url,
    http_client,
    import_llama_cpp,
    unreached,
    without_extra_buffer_types,
)
from veridic._sample import cut_short, quoted
from veridic._urls import masked, shown_url, url_secrets
from veridic.errors import VeridicError
from veridic.text.terminal_view import visible

__all__ = [
    "RETRIED",
    "Backend",
    "BackendError",
    "Completion",
    "EndpointBackend",
    "LlamaBackend",
    "retries_note",
    "retry_after",
]

Message = Mapping[str, str]
SEED: Final = 1234


class BackendError(VeridicError):
    """The model could not be loaded or called, or answered in a shape it should not."""


@dataclass(frozen=True)
class Completion:
    """One output of the model, with the token counts the backend knows.

    ``retries`` counts the requests repeated before this answer came (an endpoint that
    answered HTTP 429, 502, 503 or 504 first).
    """

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    retries: int = 0


class Backend(Protocol):
    """A chat model that the evaluation can call."""

    def describe(self) -> Mapping[str, str]:
        """What was measured: model, runtime, settings (for the report)."""
        ...

    def complete(self, messages: Sequence[Message], max_tokens: int) -> Completion:
        """The greedy continuation of a chat."""
        ...

    def count_tokens(self, text: str) -> int | None:
        """How many tokens ``text`` costs with the model's tokenizer, if it is known."""
        ...


# --- llama-cpp-python --------------------------------------------------------------------


_CONTENT: Final = "\ue000{index}\ue001"
"""A private-use sentinel that stands for message ``index``'s content while rendering."""


_OPENED_THOUGHT: Final = re.compile(r"(<(?:think|thinking)>)\s*\Z", re.IGNORECASE)
"""A generation prompt that ends inside an opened thought."""


def _import_llama_cpp() -> Any:
    return import_llama_cpp("--gguf", "`make eval-model`")


_no_extra_buffer_types = without_extra_buffer_types


class LlamaBackend:
    """A GGUF model run in-process with llama-cpp-python, greedy, on ``n_threads`` threads.

    Raises:
        MissingExtraError: llama-cpp-python is not installed.
        BackendError: the file is missing or has no chat template.
    """

    def __init__(
        self, model_path: Path, *, n_threads: int = 2, n_ctx: int = 2048, seed: int = SEED
    ) -> None:
        if not model_path.is_file():
            raise BackendError(
                f"no model file at {model_path}: pass the path of a GGUF file to --gguf"
            )
        module = _import_llama_cpp()
        self._path = model_path
        self._seed = seed
        self._threads = n_threads
        options: dict[str, object] = {
            "model_path": str(model_path),
            "n_ctx": n_ctx,
            "n_threads": n_threads,
            "n_threads_batch": n_threads,
            "seed": seed,
            "verbose": False,
        }
        with _no_extra_buffer_types(module) as switched_off:
            self._llm = _loaded(module, options)
        self._extra_bufts_off = switched_off
        # The window the runtime made: n_ctx=0 asks for the one the model was trained with.
        self._n_ctx = self._llm.n_ctx()
        self._version = str(getattr(module, "__version__", "unknown"))
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise BackendError(
                f"{model_path.name} has no chat template in its metadata: the evaluation "
                "needs an instruct (chat) model"
            )
        self._template = _compile_template(template)
        self._bos = self._piece(self._llm.token_bos())
        self._eos = self._piece(self._llm.token_eos())
        self._thought = self._opened_thought()

    def _opened_thought(self) -> str:
        """The reasoning tag the template's generation prompt opens (``""``: none).

        A DeepSeek-R1 distill's template ends the prompt with ``<think>``: the output is
        then reasoning from its first token, with no opening tag, and a thought cut off
        by the budget could not be told from an answer. The tag is put back in front of
        each output, so the judge reads it as the thought it is.
        """
        probe = self._template(
            messages=[{"role": "user", "content": "?"}],
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
        )
        opened = _OPENED_THOUGHT.search(probe)
        return "" if opened is None else opened.group(1)

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llm.detokenize([token], special=True).decode("utf-8", "replace")

    def describe(self) -> Mapping[str, str]:
        """Model file, runtime version and the settings that make a run repeatable."""
        return {
            "backend": "llama-cpp-python",
            "runtime": f"llama-cpp-python {self._version}",
            "model": self._path.name,
            "threads": str(self._threads),
            "seed": str(self._seed),
            "decoding": "greedy (temperature 0)",
            "extra buffer types": "off" if self._extra_bufts_off else "default",
            "special tokens in content": "not parsed (content is text)",
        }

    def prompt_tokens(self, messages: Sequence[Message]) -> list[int]:
        """The chat template applied to ``messages``, contents tokenised as plain text."""
        stand_ins = [
            {**message, "content": _CONTENT.format(index=index)}
            for index, message in enumerate(messages)
        ]
        rendered = self._template(
            messages=stand_ins,
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
        )
        tokens: list[int] = []
        position = 0
        first = True
        for index, message in enumerate(messages):
            marker = _CONTENT.format(index=index)
            found = rendered.find(marker, position)
            if found < 0:
                raise BackendError(
                    f"the chat template of {self._path.name} dropped message {index} "
                    f"(role {message.get('role')!r}): use a model whose template keeps "
                    "every message"
                )
            tokens += self._tokenize(rendered[position:found], special=True, first=first)
            tokens += self._tokenize(message["content"], special=False, first=False)
            position = found + len(marker)
            first = False
        tokens += self._tokenize(rendered[position:], special=True, first=first)
        return tokens

    def _tokenize(self, text: str, *, special: bool, first: bool) -> list[int]:
        if not text:
            return []
        add_bos = first and not (self._bos and text.startswith(self._bos))
        return self._llm.tokenize(text.encode("utf-8", "surrogatepass"), add_bos, special)

    def complete(self, messages: Sequence[Message], max_tokens: int) -> Completion:
        """Greedy decoding of at most ``max_tokens`` tokens.

        The text starts with the reasoning tag the chat template opened, if it opened one
        (a DeepSeek-R1 distill's opens ``<think>``): the thought as the model continued it.

        Raises:
            BackendError: the prompt and ``max_tokens`` do not fit the context window.
                llama-cpp-python raises a bare ValueError for a prompt longer than the
                window, and quietly lowers ``max_tokens`` for one that leaves less room
                than asked, so an answer was cut short and judged as the model's whole.
        """
        prompt = self.prompt_tokens(messages)
        if len(prompt) + max_tokens > self._n_ctx:
            raise BackendError(
                f"a prompt of {len(prompt)} tokens and an answer of up to {max_tokens} do "
                f"not fit the context window of {self._n_ctx} tokens of {self._path.name}: "
                f"give a window of at least {len(prompt) + max_tokens} tokens (--n-ctx "
                f"{len(prompt) + max_tokens} on the command line, LlamaBackend(n_ctx=...) in "
                "code; 0 takes the window the model was trained with), or a smaller "
                "--max-tokens"
            )
        started = time.perf_counter()
        response = self._llm.create_completion(
            prompt,
            max_tokens=max_tokens,
            temperature=0.0,
            top_k=1,
            top_p=1.0,
            min_p=0.0,
            repeat_penalty=1.0,
            seed=self._seed,
        )
        seconds = time.perf_counter() - started
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(
            text=self._thought + str(choice["text"]),
            prompt_tokens=int(usage.get("prompt_tokens", len(prompt))),
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            seconds=seconds,
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as message content (plain text, no BOS)."""
        return len(self._tokenize(text, special=False, first=False))


def _loaded(module: Any, options: Mapping[str, object]) -> LlamaModel:
    """``module.Llama(**options)``, whose refusal is a :class:`BackendError`.

    llama-cpp-python raises a bare ``ValueError`` ("Failed to load model from file") for
    a file it cannot read, most often a download cut short, which starts like a whole
    one: it came out as a traceback.
    """
    try:
        return cast("LlamaModel", module.Llama(**options))
    except ValueError as error:
        raise BackendError(
            f"llama-cpp-python could not load {options['model_path']} ({error}): the file "
            "may be truncated (compare its size and sha256 with those its source gives, "
            "and download it again) or in a format this llama-cpp-python does not read "
            "(a newer model may need a newer runtime)"
        ) from error


def _compile_template(source: str) -> Callable[..., str]:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> str:
        raise BackendError(f"the model's chat template refused the messages: {message}")

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True
    )
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: time.strftime(fmt, time.gmtime(0))
    template = environment.from_string(source)
    return template.render


def _advice(status: int) -> str:
    """What to do about an HTTP error status of the endpoint."""
    if status == 429 or status >= 500:
        return (
            "the server is busy, rate-limited or failing: wait, then rerun the same "
            "command, with --resume if the answers so far were kept"
        )
    if status in (401, 403):
        return (
            "the endpoint refused the key: put it in the environment variable that "
            "--api-key-env names (default VERIDIC_EVAL_API_KEY)"
        )
    return "check the URL, the model name and the key"


def _int_or_none(value: object) -> int | None:
    """A token count as a server gave it, or ``None`` for anything that is no count.

    ``true`` is an int to ``isinstance``: kept, it was written to the record as ``true``,
    which reading the record back refuses; a negative count counts nothing.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""A surrogate code point alone: json.loads joins a whole pair into one character."""


def _with_reasoning(content: object, message: object) -> object:
    """``content``, or the reasoning a server gave apart when there is no content.

    A reasoning server (vLLM, llama.cpp's, DeepSeek's) returns the thinking in
    ``reasoning_content`` (or ``reasoning``) and the answer in ``content``; a thought cut
    off by the answer budget leaves ``content`` empty or null. That is not an empty
    answer (an order refused and a task failed) nor a reply without text: it becomes
    ``<think>`` and the reasoning, which the judge reads as cut off before any answer.
    """
    reasoning = None
    if isinstance(content, list):
        content, reasoning = _parts(content)
    if content or not isinstance(message, dict):
        return content
    reasoning = reasoning or message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        return f"<think>{reasoning}"
    return content


_FIRST_REASONING_TAG: Final = re.compile(r"<(/?)(think|thinking)>", re.IGNORECASE)


def _opened_by_the_prompt(content: object) -> object:
    """``content``, with ``<think>`` put back in front when its first reasoning tag is a
    closer (``reasoning</think>answer``).

    An endpoint's chat template cannot be seen: one that ends the prompt with ``<think>``
    (a DeepSeek-R1 distill served without a reasoning parser) gives the thought with no
    opening tag. The local model's template is read instead (:class:`LlamaBackend`),
    and the judge reads a closer no tag opened as part of the answer, so the tag the
    prompt opened is put back here, as the local backend puts it back. A model served
    by an endpoint that thinks not at all and writes a stray closer is read the same
    way: the record shows the tag put back.
    """
    if not isinstance(content, str):
        return content
    first = _FIRST_REASONING_TAG.search(content)
    if first is None or not first.group(1):
        return content
    return f"<{first.group(2)}>{content}"


def _parts(parts: list[object]) -> tuple[object, str | None]:
    """The text and the reasoning of a content given as parts (Mistral's shape).

    ``{"type": "text", "text": ...}`` parts are the answer, joined; ``{"type":
    "thinking", "thinking": [text parts]}`` the reasoning. A part of any other type
    (an image, a refusal, thinking inside thinking) leaves the content as it came,
    which is not text: read one level deep, so a server nesting thousands of levels
    stops the run with that message, not a ``RecursionError``.
    """
    texts: list[str] = []
    thoughts: list[str] = []
    if not parts:
        return parts, None  # no answer at all, not an empty one
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "thinking" and isinstance(part, dict):
            inner = part.get("thinking")
            thought = inner if isinstance(inner, str) else _text_parts(inner)
            if thought is None:
                return parts, None
            thoughts.append(thought)
        else:
            return parts, None
    return "".join(texts), "".join(thoughts) or None


def _text_parts(parts: object) -> str | None:
    """The text of a list of ``{"type": "text"}`` parts, joined; ``None`` for anything else."""
    if not isinstance(parts, list):
        return None
    texts: list[str] = []
    for part in parts:
        if not (isinstance(part, dict) and part.get("type") == "text"):
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


RETRIED: Final = frozenset({429, 502, 503, 504})
"""The statuses an endpoint answers when it is busy for now: the request is repeated.

429 and 503 come from the server; 502 and 504 from a proxy in front of it (nginx,
LiteLLM, a load balancer) while the server restarts or is slow for a moment. A 500 is
not repeated: a server that fails on one prompt fails on it again."""


def retry_after(response: HttpResponse, *, now: datetime | None = None) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait, or ``None`` without a readable one.

    The header holds seconds (a decimal is read too) or an HTTP date; a date in the past
    is no wait.

    >>> class Busy:
    ...     status_code, text, headers = 429, "", {"Retry-After": "7"}
    ...     def json(self) -> object: ...
    >>> retry_after(Busy())
    7.0
    """
    headers = getattr(response, "headers", None)  # httpx's; HttpResponse does not promise it
    value = headers.get("Retry-After") if isinstance(headers, Mapping) else None
    if not isinstance(value, str):
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


# --- OpenAI-compatible endpoints ----------------------------------------------------------


def retries_note(count: int, waited: float) -> str:
    """The record's ``retries`` entry: requests repeated after a busy answer, seconds waited.

    >>> retries_note(2, 1.5)
    '2 (requests repeated after a busy answer, HTTP 429, 502, 503 or 504; 1.5 s waited)'
    """
    return (
        f"{count} (requests repeated after a busy answer, HTTP 429, 502, 503 or 504; "
        f"{waited:g} s waited)"
    )


def _default_client() -> HttpClient:
    return http_client("--endpoint")


class EndpointBackend:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint, greedy.

    ``api_key`` is sent as a bearer token when given. Token counts come from the
    response's ``usage`` (each case's ``prompt_tokens`` in the record); the backend has
    no tokenizer of its own, so the report's token-cost columns read ``n/a``.

    A busy endpoint (HTTP 429, 502, 503 or 504) is asked again up to ``retries`` times, after the
    wait its ``Retry-After`` header asks for, or else after ``backoff`` seconds doubled
    at each retry; no wait is longer than ``max_wait`` seconds, and a server that asks
    for a longer one is not asked again (one rate-limit answer failed the whole case
    before). ``on_retry`` is told of each wait; :meth:`describe` counts them.

    Raises:
        MissingExtraError: no client was given and httpx is not installed.
        ValueError: ``retries`` below 0, a wait that is not a number of seconds, or an
            ``endpoint`` that is no URL (a lost bracket, a port that is no number, a
            ``/``, ``?`` or ``#`` of its user part ending its host early), said without
            its credentials.
    """

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        api_key: str | None = None,
        client: HttpClient | None = None,
        timeout: float = 120.0,
        seed: int = SEED,
        retries: int = 3,
        max_wait: float = 60.0,
        backoff: float = 1.0,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError(f"EndpointBackend(retries={retries}): give 0 or more")
        if not (0 <= max_wait < math.inf and 0 <= backoff < math.inf):
            raise ValueError(
                f"EndpointBackend(max_wait={max_wait}, backoff={backoff}): give finite "
                "seconds, 0 or more"
            )
        self._retries = retries
        self._max_wait = max_wait
        self._backoff = backoff
        self._on_retry = on_retry
        self._retried = 0
        self._waited = 0.0
        self._url = chat_url(endpoint)
        self._shown = shown_url(self._url)  # what messages and records say: no credentials
        self._secrets = url_secrets(self._url, api_key)
        self._model = model
        self._api_key = api_key
        self._client = client if client is not None else _default_client()
        self._timeout = timeout
        self._seed = seed
        self._served: dict[str, None] = {}

    def describe(self) -> Mapping[str, str]:
        """Endpoint, model name asked for, the names the answers gave, decoding settings.

        ``served model`` lists the ``model`` field of the answers so far (a router or a
        server with one model loaded may answer with another model than the one asked
        for), ``(not said)`` when none gave one. ``retries``, once there were any, counts
        the requests repeated after a busy answer and the seconds waited for them.
        """
        described = {
            "backend": "openai-compatible endpoint",
            "endpoint": self._shown,
            "model": self._model,
            "served model": ", ".join(self._served) or "(not said)",
            "seed": str(self._seed),
            "decoding": "greedy (temperature 0)",
        }
        if self._retried:
            described["retries"] = retries_note(self._retried, self._waited)
        return described

    def complete(self, messages: Sequence[Message], max_tokens: int) -> Completion:
        """One chat-completions call.

        Raises:
            BackendError: the endpoint answered with an error or an unexpected body.
        """
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        body = {
            "model": self._model,
            "messages": [dict(message) for message in messages],
            "temperature": 0,
            "max_tokens": max_tokens,
            "seed": self._seed,
        }
        started = time.perf_counter()
        retries = 0
        while True:
            response = self._post(body, headers)
            if response.status_code not in RETRIED or retries == self._retries:
                break
            wait, why = self._wait(response, retries)
            if wait is None:
                break
            retries += 1
            self._retried += 1
            self._waited += wait
            if self._on_retry is not None:
                self._on_retry(
                    f"{self._shown} answered HTTP {response.status_code} ({why}): asking "
                    f"again in {wait:g} s, retry {retries} of {self._retries}"
                )
            time.sleep(wait)
        seconds = time.perf_counter() - started
        if response.status_code != 200:
            raise BackendError(
                f"{self._shown} answered HTTP {response.status_code} for model {self._model!r}: "
                f"{self._quoted(response.text) or '(an empty body)'}; "
                f"{self._gave_up(response, retries)}"
                f"{self._redirect(response) or _advice(response.status_code)}"
            )
        try:
            payload = response.json()
            choice = payload["choices"][0]
            text = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as error:
            # RecursionError: a body nested thousands deep, which json cannot decode.
            if response.text.lstrip().startswith("data:"):
                raise BackendError(
                    f"{self._shown} streamed its answer for model {self._model!r} as "
                    f"server-sent events ({self._quoted(response.text, 120)}) although the request "
                    "asked for one JSON body: turn streaming off in the server or the proxy "
                    "in front of it"
                ) from error
            raise BackendError(
                f"{self._shown} answered without choices[0].message.content ({error}): "
                f"{self._quoted(response.text)}; is it an OpenAI-compatible chat endpoint?"
            ) from error
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        text = _opened_by_the_prompt(_with_reasoning(text, choice["message"]))
        if isinstance(text, str):
            # Half of a surrogate pair (JSON "\ud83d", a cut made by UTF-16 units) is no
            # character: kept, the record could not be written in UTF-8 after the run.
            text = _LONE_SURROGATE.sub("\ufffd", text)
        if not isinstance(text, str) or finish == "content_filter":
            # Read as "", such an answer was judged an order not followed: a success of
            # the defence that the model never gave.
            raise BackendError(
                f"{self._shown} answered model {self._model!r} with no text (content "
                f"{self._quoted_value(text)}, finish_reason {self._quoted_value(finish)}): a "
                "refusal, a filtered answer or a tool call is neither an order followed nor "
                "one refused, so the evaluation stops; turn the endpoint's filter or tools "
                "off, or measure another model"
            )
        served = payload.get("model") if isinstance(payload, dict) else None
        if isinstance(served, str):
            # The record's "served model": half a surrogate pair would make it unwritable.
            # Masked too: the record is committed with the results, and a proxy may echo
            # the key it was sent.
            self._served.setdefault(self._masked(_LONE_SURROGATE.sub("\ufffd", served)), None)
        usage = payload.get("usage") if isinstance(payload, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        return Completion(
            # Masked as the served model's name is (a proxy may echo the key in the content),
            # before it is judged: the record re-judges to the verdicts it holds.
            text=self._masked(text),
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            seconds=seconds,
            retries=retries,
        )

    def _quoted(self, text: str, limit: int = 300) -> str:
        """What the server answered, as an error quotes it: the credentials this backend
        sends replaced by ``***`` (a server refusing a key often repeats it, an error page
        the URL it was asked), then clipped, each control or bidi character as a code."""
        return visible(self._masked(text), limit)

    def _quoted_value(self, value: object, limit: int = 80) -> str:
        """A value of the server's answer as :func:`quoted` gives it, the credentials this
        backend sends masked first (a ``repr`` spells them as written)."""
        if isinstance(value, str):
            return quoted(self._masked(value), limit)
        return cut_short(self._masked(repr(value)), limit)

    def _masked(self, text: str) -> str:
        """``text`` with the credentials this backend sends replaced by ``***``."""
        return masked(text, self._secrets)

    def _post(self, body: Mapping[str, object], headers: Mapping[str, str]) -> HttpResponse:
        try:
            return self._client.post(self._url, json=body, headers=headers, timeout=self._timeout)
        except Exception as error:  # the HTTP client's own (httpx or httpx2: not imported here)
            # The client's error may quote what it was given: a key it could not put in a
            # header ("Illegal header value b'Bearer ...'"), the URL.
            # Then it is not chained either, as a traceback would print it.
            said = unreached(
                self._shown, self._model, self._timeout, error, longer="pass --timeout SECONDS"
            )
            shown = self._masked(said)
            raise BackendError(shown) from (error if shown == said else None)

    def _wait(self, response: HttpResponse, retries: int) -> tuple[float | None, str]:
        """How long to wait before retry ``retries + 1`` and why (``None``: not at all)."""
        asked = retry_after(response)
        if asked is None:
            # Bounded before it is a float: 2.0**1024 overflows.
            return min(self._backoff * 2 ** min(retries, 64), self._max_wait), "no Retry-After"
        if asked > self._max_wait:
            return None, f"Retry-After {asked:g} s"
        return asked, f"Retry-After {asked:g} s"

    def _redirect(self, response: HttpResponse) -> str | None:
        """What to do about a redirect (HTTP 3xx with a ``Location``), or ``None``.

        A redirect is not followed: the request, and the key with it, would go to a
        server nobody named. Where it leads is said without the credentials it carries.
        """
        headers = getattr(response, "headers", None)  # httpx's; HttpResponse does not promise it
        location = headers.get("Location") if isinstance(headers, Mapping) else None
        if not (300 <= response.status_code < 400 and isinstance(location, str)):
            return None
        # A relative one is the same server's; a lost bracket (ValueError) is shown as it
        # came, its credentials masked.
        with suppress(ValueError):
            location = urljoin(self._url, location)
        target = visible(self._masked(shown_url(location)), 300)
        return (
            f"it redirects to {target}, which is not followed (the request and its key would "
            "go to a server you did not name): if that is the server you mean, pass its "
            "base URL as --endpoint"
        )

    def _gave_up(self, response: HttpResponse, retries: int) -> str:
        """Why a busy answer was not asked again, as the start of the error's advice."""
        if response.status_code not in RETRIED:
            return ""
        asked = retry_after(response)
        if retries < self._retries and asked is not None:
            return (
                f"it asked to wait {asked:g} s (Retry-After), longer than --max-wait "
                f"{self._max_wait:g} s allows; "
            )
        if not self._retries:
            return "not asked again (--retries 0); "
        return f"still so after {retries} retries (--retries {self._retries}); "

    def count_tokens(self, text: str) -> int | None:
        """Unknown (``None``): an endpoint does not expose its tokenizer."""
        del text
        return None
