"""The models ``veridic probe`` asks to choose a tool: an endpoint, a local GGUF file, a script.

A chooser gets the chat messages and the tool list exactly as a provider would
(OpenAI's chat shape: ``messages``, and ``tools`` of ``{"type": "function",
"function": {...}}``) and says which tool the model called first, if any. All
of them decode greedily, so a rerun on the same runtime gives the same answer,
and :class:`CachedChooser` keeps every answer on disk under a key of the
model's identity, the messages and the tools: a rerun asks nothing twice.

- :class:`EndpointChooser`: any OpenAI-compatible ``/chat/completions`` API,
  tools sent as ``tools``, the answer read from ``tool_calls`` (or, from a
  server that leaves the model's text unparsed, from a ``<tool_call>`` in it).
  Needs httpx (``pip install 'veridic[eval-model]'``).
- :class:`LlamaChooser`: a local GGUF chat model through llama-cpp-python, the
  runtime ``make eval-model`` builds and caches. llama-cpp-python 0.3.36's
  ``create_chat_completion(tools=...)`` renders the tools into the model's
  embedded Jinja template but returns the answer as plain ``content`` (it
  parses no ``tool_calls`` unless ``tool_choice`` forces one tool, which would
  decide the answer), and its template clock is the wall clock; so the
  template is rendered here (clock fixed) and the ``<tool_call>{...}</tool_call>``
  that Qwen-style templates ask for is parsed here.
- :class:`ScriptedChooser`: answers from a table, for tests (no model).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, cast
from urllib.parse import parse_qsl, urlsplit

from veridic._counted import counted
from veridic._model_runtime import (
    HttpClient,
    LlamaModel,
    chat_url,
    gguf_problem,
    http_client,
    import_llama_cpp,
    unreached,
    without_extra_buffer_types,
)
from veridic._sample import clip
from veridic._urls import (
    VERSION_PARAMETERS,
    masked,
    reads_as_version,
    shown_url,
    url_secrets,
)
from veridic.checks._regular import read_regular
from veridic.errors import VeridicError

__all__ = [
    "CachedChooser",
    "Choice",
    "ChoiceCache",
    "EndpointChooser",
    "LlamaChooser",
    "ProbeModelError",
    "ScriptedChooser",
    "ToolChooser",
    "default_cache_dir",
    "parse_tool_call",
]

Message = Mapping[str, str]
ToolList = Sequence[Mapping[str, object]]
SEED: Final = 1234
MAX_TOKENS: Final = 128
"""Enough for a tool name and short arguments: only the first call is read."""
_CACHE_FORMAT: Final = 1


class ProbeModelError(VeridicError):
    """The model could not be loaded or asked, or answered in a shape it should not."""


@dataclass(frozen=True, slots=True)
class Choice:
    """The first tool the model called (``name``, ``None`` for no call) and its arguments.

    ``arguments`` is the JSON text the model wrote; ``text`` what it wrote
    besides (clipped), which says why when it called nothing.
    """

    name: str | None
    arguments: str = ""
    text: str = ""

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "arguments": self.arguments, "text": self.text}

    @classmethod
    def from_json(cls, data: object) -> Choice | None:
        """The choice a cache file holds, or ``None`` (then the question is asked again)."""
        if not isinstance(data, Mapping):
            return None
        name, arguments, text = data.get("name"), data.get("arguments"), data.get("text")
        if not (name is None or isinstance(name, str)):
            return None
        if not isinstance(arguments, str) or not isinstance(text, str):
            return None
        return cls(name, arguments, text)


class ToolChooser(Protocol):
    """A model that the probe asks to choose a tool."""

    def identity(self) -> str:
        """What the cache keys on: the model and every setting that changes its answer."""
        ...

    def describe(self) -> Mapping[str, str]:
        """What was asked, for the report: model, runtime, decoding."""
        ...

    def choose(self, messages: Sequence[Message], tools: ToolList) -> Choice:
        """The first tool the model calls for this chat, greedy.

        Raises:
            ProbeModelError: the model could not be asked or answered out of shape.
        """
        ...


# --- reading a call out of the model's text ----------------------------------------------

_TOOL_CALL: Final = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def parse_tool_call(text: str) -> Choice:
    """The first call in a model's text: a ``<tool_call>{"name": ..., "arguments": ...}``
    block (Qwen, Hermes and many chat templates), else a bare JSON object with a ``name``.

    >>> parse_tool_call('<tool_call>\\n{"name": "search_hotels", "arguments": {"city": "Oslo"}}')
    Choice(name='search_hotels', arguments='{"city": "Oslo"}', text='')
    >>> parse_tool_call("I cannot help with that.").name is None
    True
    """
    found = _TOOL_CALL.search(text)
    body = found.group(1) if found else text.strip()
    rest = (text[: found.start()] + text[found.end() :]).strip() if found else ""
    call = _json_object(body)
    if call is None or not isinstance(call.get("name"), str):
        return Choice(None, "", clip(text.strip(), 200) if text.strip() else "")
    arguments = call.get("arguments", call.get("parameters", {}))
    written = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Choice(str(call["name"]), written, clip(rest, 200) if rest else "")


def _json_object(text: str) -> dict[str, object] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- a script, for tests -------------------------------------------------------------------


class ScriptedChooser:
    """Chooses from ``table``: the user's request (the last user message) to a tool name.

    A request missing from the table gets ``default`` (``None``: no call).
    ``asked`` keeps every (messages, tools) it was given, in order, so a test
    can read the prompt the probe sent.

    >>> chooser = ScriptedChooser({"Find hotels in Oslo.": "search_hotels"})
    >>> chooser.choose([{"role": "user", "content": "Find hotels in Oslo."}], []).name
    'search_hotels'
    """

    def __init__(
        self,
        table: Mapping[str, str | None],
        *,
        default: str | None = None,
        model: str = "scripted",
    ) -> None:
        self._table = dict(table)
        self._default = default
        self._model = model
        self.asked: list[tuple[list[dict[str, str]], list[Mapping[str, object]]]] = []

    def identity(self) -> str:
        return f"scripted:{self._model}"

    def describe(self) -> Mapping[str, str]:
        return {"backend": "scripted (a table)", "model": self._model}

    def choose(self, messages: Sequence[Message], tools: ToolList) -> Choice:
        self.asked.append(([dict(m) for m in messages], list(tools)))
        request = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        name = self._table.get(request, self._default)
        return Choice(name, "{}" if name is not None else "", "")


# --- the cache ----------------------------------------------------------------------------


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``probe`` under the evaluation's cache (``$VERIDIC_EVAL_CACHE``, else
    ``~/.cache/veridic-eval``), where ``make eval-model`` keeps its model too."""
    env = os.environ if environ is None else environ
    configured = env.get("VERIDIC_EVAL_CACHE")
    base = Path(configured).expanduser() if configured else Path.home() / ".cache" / "veridic-eval"
    return base / "probe"


class ChoiceCache:
    """Answers on disk, one JSON file per key (written whole, then renamed into place).

    The key is the sha256 of the chooser's identity, the messages and the tool
    list as canonical JSON: any change to the prompt, the specs or the model
    is a new question; the same question is never asked twice.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @staticmethod
    def key(identity: str, messages: Sequence[Message], tools: ToolList) -> str:
        canonical = json.dumps(
            {"format": _CACHE_FORMAT, "model": identity, "messages": messages, "tools": tools},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )
        return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Choice | None:
        try:
            data = json.loads(read_regular(self._path(key)).decode("utf-8"))
        except (OSError, ValueError):
            return None
        return Choice.from_json(data.get("choice")) if isinstance(data, dict) else None

    def put(self, key: str, choice: Choice, identity: str) -> None:
        """Store ``choice``.

        Raises:
            ProbeModelError: the cache folder cannot be written (the message names it).
        """
        path = self._path(key)
        record = {"format": _CACHE_FORMAT, "model": identity, "choice": choice.to_json()}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp"
            ) as handle:
                json.dump(record, handle, sort_keys=True)
            Path(handle.name).replace(path)
        except OSError as error:
            raise ProbeModelError(
                f"cannot write the probe cache at {path.parent} ({error}): pass --cache DIR "
                "with a writable folder, or --no-cache"
            ) from error


class CachedChooser:
    """``chooser`` behind a :class:`ChoiceCache`, counting what it ``asked`` and ``reused``."""

    def __init__(self, chooser: ToolChooser, cache: ChoiceCache) -> None:
        self._chooser = chooser
        self._cache = cache
        self.asked = 0
        self.reused = 0

    def identity(self) -> str:
        return self._chooser.identity()

    def describe(self) -> Mapping[str, str]:
        return {**self._chooser.describe(), "cache": str(self._cache.folder)}

    def choose(self, messages: Sequence[Message], tools: ToolList) -> Choice:
        identity = self._chooser.identity()
        key = ChoiceCache.key(identity, messages, tools)
        found = self._cache.get(key)
        if found is not None:
            self.reused += 1
            return found
        choice = self._chooser.choose(messages, tools)
        self.asked += 1
        self._cache.put(key, choice, identity)
        return choice


# --- OpenAI-compatible endpoints ----------------------------------------------------------


def _http_client() -> HttpClient:
    return http_client("veridic probe --endpoint")


class EndpointChooser:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint, greedy.

    ``endpoint`` is a base URL (``http://host/v1``) or the full chat URL;
    ``api_key`` is sent as a bearer token when given.

    Raises:
        MissingExtraError: no client was given and httpx is not installed.
        ValueError: ``endpoint`` is no URL (a lost bracket, a port that is no number,
            a ``/``, ``?`` or ``#`` of its user part ending its host early), or the value
            of its ``api-version`` reads as no version (see :meth:`identity`); the message
            shows it without its credentials.
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
    ) -> None:
        self._url = chat_url(endpoint)
        self._shown = shown_url(self._url)  # what messages and records say: no credentials
        self._versions = _versions(self._url, self._shown)
        self._secrets = url_secrets(self._url, api_key)  # as a server's answer may repeat them
        self._model = model
        self._api_key = api_key
        self._client = client if client is not None else _http_client()
        self._timeout = timeout
        self._seed = seed

    def identity(self) -> str:
        """The shown URL, the values of its query's ``api-version`` (the parameters of
        ``veridic._urls.VERSION_PARAMETERS``, whose value changes what the endpoint
        answers and is no credential), the model.

        The shown URL hid every query value, and an answer of one ``api-version``
        was reused for another; it shows a version's value now, and the cache tells
        every value apart. No other value enters: the identity is written into the
        cache, and a key or a signature changes nothing the model answers. A value that
        reads as no version (a key put there, a line break, 500 characters) is refused
        when the chooser is made, so none is written.
        """
        told = f" {self._versions}" if self._versions else ""
        return f"endpoint:{self._shown}{told} model:{self._model} greedy seed:{self._seed}"

    def describe(self) -> Mapping[str, str]:
        return {
            "backend": "openai-compatible endpoint",
            "endpoint": self._shown,
            "model": self._model,
            "decoding": "greedy (temperature 0)",
        }

    def choose(self, messages: Sequence[Message], tools: ToolList) -> Choice:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        body = {
            "model": self._model,
            "messages": [dict(m) for m in messages],
            "tools": list(tools),
            "tool_choice": "auto",
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
            "seed": self._seed,
        }
        try:
            response = self._client.post(
                self._url, json=body, headers=headers, timeout=self._timeout
            )
        except Exception as error:  # the HTTP client's own (httpx or httpx2: not imported here)
            longer = f"give EndpointChooser a longer timeout= (now {self._timeout:g} s)"
            message = unreached(self._shown, self._model, self._timeout, error, longer=longer)
            # The client's error may quote what it was given (a header it refused, the URL):
            # then it is not chained either, as a traceback would print it.
            shown = masked(message, self._secrets)
            raise ProbeModelError(shown) from (error if shown == message else None)
        if response.status_code != 200:
            raise ProbeModelError(
                f"{self._shown} answered HTTP {response.status_code} for model {self._model!r}: "
                f"{self._quoted(response.text)}; check the URL, the model name and the key "
                "(--api-key-env), and that the model accepts tools"
            )
        try:
            message = response.json()["choices"][0]["message"]
            content = message.get("content") or ""
            calls = message.get("tool_calls") or []
            if calls:
                function = calls[0]["function"]
                arguments = function.get("arguments", "")
                written = arguments if isinstance(arguments, str) else json.dumps(arguments)
                return Choice(str(function["name"]), written, clip(content, 200) if content else "")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            raise ProbeModelError(
                f"{self._shown} answered without choices[0].message ({type(error).__name__}: "
                f"{error}): {self._quoted(response.text)}; is it an OpenAI-compatible chat "
                "endpoint?"
            ) from error
        return parse_tool_call(str(content))  # a server that leaves the call in the text

    def _quoted(self, text: str) -> str:
        """What the server answered, as an error quotes it: the key and the URL's
        credentials replaced by ``***`` (a server refusing a key often repeats it)."""
        return clip(masked(text, self._secrets), 300)


def _versions(url: str, shown: str) -> str:
    """The ``api-version`` items of ``url``'s query, as :meth:`EndpointChooser.identity`
    writes them into the probe cache.

    Raises:
        ValueError: one's value reads as no version; the message says what one looks
            like and does not repeat the value (a key put there by mistake).
    """
    items = [
        (name, value)
        for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True)
        if name.lower() in VERSION_PARAMETERS
    ]
    for name, value in items:
        if not reads_as_version(value):
            raise ValueError(
                f"endpoint {shown!r}: its {name} (a value of {counted(len(value), 'character')},"
                " not shown) reads as no API version, and the probe cache would record it: "
                "give a date (2024-10-01-preview), a number (1, v1, 2.0), preview or latest; "
                "a key goes in --api-key-env (api_key=), never in the URL"
            )
    return "&".join(f"{name}={value}" for name, value in items)


# --- a local GGUF model ---------------------------------------------------------------------


def _llama_cpp() -> Any:
    return import_llama_cpp("veridic probe --gguf", "`make eval-probe`")


def _tojson(
    value: object,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Transformers' (and llama-cpp-python's) tojson: plain json.dumps, no HTML escaping,
    # so the tool list reads as the model was trained on it.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _template(source: str) -> Callable[..., str]:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def refuse(message: str) -> str:
        raise ProbeModelError(f"the model's chat template refused the messages: {message}")

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, extensions=[loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = refuse
    environment.globals["strftime_now"] = lambda fmt: time.strftime(fmt, time.gmtime(0))
    return environment.from_string(source).render


class LlamaChooser:
    """A GGUF chat model run in-process with llama-cpp-python, greedy, on ``n_threads`` threads.

    The model's embedded chat template renders the messages and the tool
    list (``tools=``, as Hugging Face templates take it); the whole prompt is
    tokenised with special tokens parsed, which is right for what the probe
    sends (the application's own descriptions and the requests its team
    wrote). ``llm`` is an already loaded ``llama_cpp.Llama`` (tests pass a
    fake; ``model_path`` then only names it).

    Raises:
        MissingExtraError: llama-cpp-python is not installed.
        ProbeModelError: the file is missing, is no GGUF model (a folder, an empty file,
            a Git LFS pointer, another format: told before the runtime is imported), or
            has no chat template that renders tools.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        n_threads: int = 2,
        n_ctx: int = 4096,
        seed: int = SEED,
        llm: object = None,
    ) -> None:
        self._path = model_path
        self._threads = n_threads
        self._seed = seed
        if llm is None:
            if not model_path.exists():
                raise ProbeModelError(
                    f"no model file at {model_path}: pass the path of a GGUF chat model to "
                    "--gguf (`python -m veridic.evaluation --install-only` prints the pinned one)"
                )
            # Before the runtime: a folder or a Git LFS pointer was loaded, or an install
            # of minutes suggested, for a file that is no model.
            if (problem := gguf_problem(model_path)) is not None:
                raise ProbeModelError(problem)
            module = _llama_cpp()
            options = {
                "model_path": str(model_path),
                "n_ctx": n_ctx,
                "n_threads": n_threads,
                "n_threads_batch": n_threads,
                "seed": seed,
                "verbose": False,
            }
            with without_extra_buffer_types(module):
                llm = module.Llama(**options)
            self._runtime = f"llama-cpp-python {getattr(module, '__version__', 'unknown')}"
            self._fingerprint = _fingerprint(model_path)
        else:
            self._runtime = "given runtime"
            self._fingerprint = model_path.name
        self._llm = cast("LlamaModel", llm)
        source = self._llm.metadata.get("tokenizer.chat_template")
        if not source or "tools" not in source:
            raise ProbeModelError(
                f"{model_path.name} has no chat template that renders a tool list (its "
                "metadata's tokenizer.chat_template never reads `tools`): the probe needs a "
                "chat model trained to call tools, e.g. Qwen2.5-Instruct"
            )
        self._render = _template(source)
        self._bos = self._piece(self._llm.token_bos())
        self._eos = self._piece(self._llm.token_eos())

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llm.detokenize([token], special=True).decode("utf-8", "replace")

    def identity(self) -> str:
        return (
            f"gguf:{self._fingerprint} {self._runtime} threads:{self._threads} "
            f"greedy seed:{self._seed} max_tokens:{MAX_TOKENS}"
        )

    def describe(self) -> Mapping[str, str]:
        return {
            "backend": self._runtime,
            "model": self._path.name,
            "threads": str(self._threads),
            "decoding": "greedy (temperature 0)",
        }

    def prompt(self, messages: Sequence[Message], tools: ToolList) -> str:
        """The chat template applied to ``messages`` and ``tools``, ready for the answer."""
        return self._render(
            messages=[dict(m) for m in messages],
            tools=list(tools),
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
        )

    def choose(self, messages: Sequence[Message], tools: ToolList) -> Choice:
        text = self.prompt(messages, tools)
        add_bos = not (self._bos and text.startswith(self._bos))
        tokens = self._llm.tokenize(text.encode("utf-8", "surrogatepass"), add_bos, True)
        try:
            response = self._llm.create_completion(
                tokens,
                max_tokens=MAX_TOKENS,
                temperature=0.0,
                top_k=1,
                top_p=1.0,
                min_p=0.0,
                repeat_penalty=1.0,
                seed=self._seed,
                stop=["</tool_call>"],
            )
            written = str(response["choices"][0]["text"])
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as error:
            raise ProbeModelError(
                f"{self._path.name} did not answer ({type(error).__name__}: {error}): a prompt "
                f"of {len(tokens)} tokens may exceed the context; probe fewer tools at once"
            ) from error
        return parse_tool_call(written)


def _fingerprint(path: Path) -> str:
    """The model file's sha256 (about a second per GB): the same name may hold another model."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return f"{path.name} sha256:{digest.hexdigest()}"
