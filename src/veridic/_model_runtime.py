"""The two ways veridic reaches a real model: llama-cpp-python in-process, an HTTP endpoint.

``make eval-model`` (:mod:`veridic.evaluation.backends`) and ``veridic probe``
(:mod:`veridic.checks.choosers`) both load a GGUF model and both post to an
OpenAI-compatible endpoint, and the layout keeps them apart (neither may import
the other), so what they share lives here, below both: the part of
``llama_cpp.Llama`` they use, its import with a message that says how to install
it, the switch that keeps llama-cpp-python from repacking weights, and the HTTP
client. Each is imported lazily, only when a model is asked.
"""

from __future__ import annotations

import importlib
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final, Protocol, cast
from urllib.parse import urlunsplit

from veridic._urls import cut_short_reason, shown_url, split_url, user_part_cut_short
from veridic.errors import MissingExtraError

__all__ = [
    "HttpClient",
    "HttpResponse",
    "LlamaModel",
    "chat_url",
    "endpoint_problem",
    "gguf_problem",
    "http_client",
    "import_llama_cpp",
    "without_extra_buffer_types",
]


class LlamaModel(Protocol):
    """What veridic uses of ``llama_cpp.Llama``."""

    metadata: dict[str, str]

    def tokenize(self, text: bytes, add_bos: bool = ..., special: bool = ...) -> list[int]: ...
    def detokenize(
        self, tokens: list[int], prev_tokens: list[int] | None = ..., special: bool = ...
    ) -> bytes: ...
    def token_bos(self) -> int: ...
    def token_eos(self) -> int: ...
    def n_ctx(self) -> int: ...
    def create_completion(self, prompt: list[int], **options: Any) -> Any: ...


def import_llama_cpp(needed_by: str, then: str) -> Any:
    """The ``llama_cpp`` module.

    Raises:
        MissingExtraError: it is not installed; the message says that ``needed_by``
            needs it and how to install the pinned build (``then`` names the make
            target that does it too).
    """
    try:
        return importlib.import_module("llama_cpp")
    except ImportError as error:
        raise MissingExtraError(
            f"{needed_by} needs llama-cpp-python, which is not installed ({error}): run "
            "`python -m veridic.evaluation --install-only` (it builds the pinned version "
            f"into this environment, cached, and prints the pinned model's path) or {then}"
        ) from error


@contextmanager
def without_extra_buffer_types(module: Any) -> Iterator[bool]:
    """Load models inside this block without extra buffer types; yields whether it could.

    llama-cpp-python 0.3.36 has no constructor argument for ``use_extra_bufts``: its
    constructor takes the model parameters from ``llama_model_default_params()``, so
    that default is wrapped while the model loads. Extra buffer types (weight
    repacking) slow prompt processing on the machines this was measured on.
    """
    low = module.llama_cpp
    original = low.llama_model_default_params
    if not any(field == "use_extra_bufts" for field, *_ in type(original())._fields_):
        yield False
        return

    def without() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    low.llama_model_default_params = without
    try:
        yield True
    finally:
        low.llama_model_default_params = original


class HttpResponse(Protocol):
    """What veridic reads of an ``httpx.Response``."""

    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


class HttpClient(Protocol):
    """What veridic uses of an ``httpx.Client``."""

    def post(
        self, url: str, *, json: Any, headers: Mapping[str, str], timeout: float
    ) -> HttpResponse: ...


def chat_url(endpoint: str) -> str:
    """The chat-completions URL of an endpoint given as a base (``.../v1``) or in full.

    The path is added before a query (``?api-version=...`` of Azure-style endpoints),
    which the request keeps.

    >>> chat_url("http://localhost:8080/v1")
    'http://localhost:8080/v1/chat/completions'
    >>> chat_url("https://llm.example/openai/v1/?api-version=2024-06-01")
    'https://llm.example/openai/v1/chat/completions?api-version=2024-06-01'

    Raises:
        ValueError: ``endpoint`` cannot be taken apart or its port is no number, said
            without its credentials: ``urlsplit``'s own message quotes the netloc or
            the bracketed host, and a port that is no number (most often a password
            whose ``@host`` was forgotten) reached the HTTP client, whose error quoted it.
            Or a ``/``, ``?`` or ``#`` in its user part ends its host early
            (:func:`~veridic._urls.user_part_cut_short`): the request went to a server
            named by the user part's head, the key with it.
    """
    if user_part_cut_short(endpoint):
        raise ValueError(f"endpoint {cut_short_reason(endpoint)}")
    try:
        parts = split_url(endpoint)
    except ValueError as error:
        raise ValueError(
            f"endpoint {shown_url(endpoint)!r} is not a URL ({error}): give the server's "
            "base URL, e.g. http://localhost:8080/v1"
        ) from None
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path = f"{path}/chat/completions"
    return urlunsplit(parts._replace(path=path))


_GGUF_MAGIC = b"GGUF"
"""The first four bytes of every file in llama.cpp's model format."""

_LFS_POINTER = b"version https://git-lfs"
"""How a Git LFS pointer file starts: a model repository cloned without git-lfs."""


def gguf_problem(path: Path) -> str | None:
    """Why ``path`` (a ``--gguf`` option's value) is no GGUF model file, or ``None``.

    Read from its first bytes, before anything is installed or loaded: a folder, a text
    file or a Git LFS pointer passed the check that the file exists, and the runtime was
    built (minutes) before llama.cpp refused it. A file cut short starts like a whole one,
    so it passes here; loading it fails (see :class:`veridic.evaluation.backends.LlamaBackend`).
    The reason starts with the path; the caller puts the option's name in front.
    """
    if path.is_dir():
        found = sorted(path.glob("*.gguf"))[:3]
        example = f", e.g. {found[0]}" if found else ""
        return f"{path} is a folder: pass the .gguf file in it{example}"
    if not path.is_file():
        return f"{path}: no such file: pass the path of a GGUF model"
    try:
        with path.open("rb") as stream:
            head = stream.read(len(_LFS_POINTER))
    except OSError as error:
        return f"{path} cannot be read ({error.strerror or error}): pass a file you can read"
    if not head:
        return f"{path} is empty: pass a model in llama.cpp's GGUF format"
    if head.startswith(_LFS_POINTER):
        return (
            f"{path} is a Git LFS pointer, not the model: fetch the file itself (git lfs "
            "pull, or download it) and pass that GGUF file"
        )
    if not head.startswith(_GGUF_MAGIC):
        return (
            f"{path} is not a GGUF file (it starts with {head[:4]!r}, not b'GGUF'): pass a "
            "model in llama.cpp's GGUF format (convert others with llama.cpp's "
            "convert_hf_to_gguf.py)"
        )
    return None


def endpoint_problem(endpoint: str) -> str | None:
    """Why ``endpoint`` (an ``--endpoint`` option's value) can be asked nothing, or ``None``.

    Both command lines that take an ``--endpoint`` (``veridic probe``, ``make
    eval-model``) check it with this before anything is imported or asked: a lost
    bracket made ``urlsplit`` raise a traceback, and a port that is no port or a space
    in the URL was found only at the first request, reported as a server that could
    not be reached. A ``/``, ``?`` or ``#`` in a user part (a base64 token) ends the
    host early and sent the request to a server named by its head
    (:func:`~veridic._urls.user_part_cut_short`). The reason quotes ``endpoint`` as
    :func:`~veridic._urls.shown_url` shows it, and ends with what to pass instead;
    the caller puts the option's name in front.

    >>> endpoint_problem("http://localhost:8080/v1") is None
    True
    >>> print(endpoint_problem("ftp://me:s3cret@localhost/v1"))  # doctest: +ELLIPSIS
    'ftp://***@localhost/v1' is not an http or https URL with a host: pass the base URL ...
    """
    shown = repr(shown_url(endpoint))
    fix = "pass the base URL of an OpenAI-compatible API, e.g. http://localhost:8080/v1"
    if user_part_cut_short(endpoint):  # before the port: its "port" may be the password
        return cut_short_reason(endpoint)
    try:
        parts = split_url(endpoint)  # a port that is no number raises here
    except ValueError as error:
        return f"{shown} is not a URL ({error}): {fix}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{shown} is not an http or https URL with a host: {fix}"
    userinfo, _, host = parts.netloc.rpartition("@")
    if any(character.isspace() for character in userinfo):
        return (
            f"{shown} has a space in its user name or password: write each space there as "
            "%20 (and any '@', ':' or '/' in them as %40, %3A, %2F)"
        )
    if any(character.isspace() for character in host):
        return f"{shown} has a space in its host: {fix}"
    return None


def unreached(url: str, model: str, timeout: float, error: Exception, *, longer: str) -> str:
    """What went wrong when no HTTP answer came back from ``url``, and what to do about it.

    ``error`` is the HTTP client's own (httpx's or httpx2's, not imported here, so
    it is told apart by its class's name), or :class:`_AnswerTooLarge` of
    :func:`http_client`'s; ``longer`` says how to wait longer.
    """
    kind = type(error).__name__
    if isinstance(error, _AnswerTooLarge):
        return (
            f"{url} answered {error} for model {model!r}, far more than an answer within "
            "its max_tokens: the server ignores max_tokens or is no chat endpoint; check "
            "that --endpoint is the base URL of an OpenAI-compatible API"
        )
    if "Timeout" in kind:
        return (
            f"{url} gave no answer for model {model!r} within {timeout:g} s ({kind}): a "
            f"model on a slow machine may need longer, {longer}"
        )
    return (
        f"could not reach {url} for model {model!r} ({kind}: {error}): check that the "
        "server runs and that --endpoint is its base URL, e.g. http://localhost:8080/v1"
    )


_ANSWER_BYTES_MOST: Final = 4 * 1024 * 1024
"""The most bytes an answer may hold: the answers asked for are a few hundred tokens (a
few kB); a reasoning model given ``--max-tokens`` in the tens of thousands writes some
hundred kB, which this leaves room for many times over."""


class _AnswerTooLarge(Exception):
    """An answer went on past :data:`_ANSWER_BYTES_MOST`; :func:`unreached` says so."""


class _BoundedAnswers:
    """An ``httpx.Client`` (or ``httpx2``'s) whose ``timeout`` bounds the whole answer,
    and which reads no answer past :data:`_ANSWER_BYTES_MOST`.

    httpx's timeout bounds each read: a server that sends a byte now and then (a stuck
    stream, a slow-loris proxy) was never timed out, and a run waited for as long as it
    kept sending, its status line and headers included. So each answer has a
    :class:`_Deadline`: once ``timeout`` seconds have passed since the request was sent,
    its connection is shut down, and the client's own ``ReadTimeout`` is raised, as for a
    server that went silent. (Each answer gets a connection of its own, the one the
    deadline shuts; none is kept for the next.) A body of any size was read whole into
    memory (an endpoint that ignores ``max_tokens``, a hostile one): past the bound it
    raises :class:`_AnswerTooLarge`.
    """

    def __init__(self, module: Any) -> None:
        self._module = module
        self._client = module.Client(limits=module.Limits(max_keepalive_connections=0))

    def post(
        self, url: str, *, json: Any, headers: Mapping[str, str], timeout: float
    ) -> HttpResponse:
        deadline = _Deadline(timeout)
        try:
            with deadline:
                return self._read(url, json, headers, timeout, deadline)
        except self._module.TransportError as error:
            if not deadline.passed:
                raise
            raise self._module.ReadTimeout(f"no whole answer within {timeout:g} s") from error

    def _read(
        self,
        url: str,
        json: Any,
        headers: Mapping[str, str],
        timeout: float,
        deadline: _Deadline,
    ) -> HttpResponse:
        with self._client.stream(
            "POST",
            url,
            json=json,
            headers=headers,
            timeout=timeout,
            extensions={"trace": deadline.trace},
        ) as streamed:
            chunks: list[bytes] = []
            size = 0
            # Unpacked as it comes, and counted unpacked: 40 kB of gzip may unpack to 40 MB.
            for chunk in streamed.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > _ANSWER_BYTES_MOST:
                    raise _AnswerTooLarge(f"more than {_ANSWER_BYTES_MOST // 2**20} MB")
                if deadline.passed:  # a connection not traced (another transport)
                    raise self._module.ReadTimeout(
                        f"no whole answer within {timeout:g} s", request=streamed.request
                    )
            return cast(
                "HttpResponse",
                self._module.Response(
                    streamed.status_code,
                    headers=_unpacked(streamed.headers),
                    content=b"".join(chunks),
                    request=streamed.request,
                ),
            )


class _Deadline:
    """Shuts an answer's connection down ``timeout`` seconds after the request was sent.

    httpx bounds each read, not the status line and headers as a whole, nor the body:
    a timer thread shuts the socket (the one httpx's ``trace`` extension names when it
    connects) when the time is up, which ends the read waiting on it. :attr:`passed`
    then tells the error that follows from a server that hung up. Over HTTPS the socket
    connected is handed to the TLS layer, which takes its descriptor (shutting the first
    one down did nothing, and headers trickled as before): the socket the TLS handshake
    returns is the one kept then. So is one a proxy's connection is made on.
    """

    def __init__(self, timeout: float) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._timer = threading.Timer(timeout, self._shut_down)
        self._timer.daemon = True
        self.passed = False

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        """httpx's ``trace`` extension: keep the socket the answer's connection is made on,
        or the one its TLS handshake made of it (``connection.start_tls``, a proxy's
        ``socks.connect_tcp``, ``proxy.start_tls``: the latest made is the one read)."""
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        stream = info.get("return_value")
        found = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(found, socket.socket):
            return
        with self._lock:
            self._socket = found
            late = self.passed
        if late:  # the time was up while connecting
            _shut(found)

    def _shut_down(self) -> None:
        with self._lock:
            self.passed = True
            found = self._socket
        if found is not None:
            _shut(found)


def _shut(connection: socket.socket) -> None:
    """Shut ``connection`` down both ways, which wakes the read waiting on it."""
    # An OSError: closed already, by the client done with it; nothing is left to wait on.
    with suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


def _unpacked(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """``headers`` of an answer whose body is given unpacked: without those that say how
    it was packed and how long it was, so that the new response reads it as it is."""
    packing = {"content-encoding", "content-length", "transfer-encoding"}
    return [(name, value) for name, value in headers.items() if name.lower() not in packing]


def http_client(needed_by: str) -> HttpClient:
    """A new ``httpx.Client`` (or one of ``httpx2``, the fork the openai SDK 3 depends on),
    whose ``timeout`` bounds the whole answer and whose answers are bounded in size
    (:class:`_BoundedAnswers`).

    Raises:
        MissingExtraError: neither is installed; the message says ``needed_by`` needs it.
    """
    for name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return _BoundedAnswers(module)
    raise MissingExtraError(
        f"{needed_by} needs httpx, which is not installed: pip install 'veridic[eval-model]' "
        "(or pip install httpx)"
    )
