"""The passwords of a Postgres conninfo, so that no message veridic writes shows one.

libpq quotes the conninfo as written in some errors (a URL it cannot parse)
and psycopg as it parsed it in others; an application logs what a store's
constructor raises, and ``veridic audit`` prints it in a CI log many can read.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

from veridic.errors import AuditRecordError

_PASSWORD: Final = re.compile(r"""password\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s&#]*)""", re.IGNORECASE)
_URL: Final = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)
_URL_PARAMETER: Final = re.compile(r"[?&]password=([^&#]*)", re.IGNORECASE)
_BARE_WORDS: Final = re.compile(
    r"""password\s*=\s*[^\s']\S*((?:\s+[^\s=']+(?![^\s=']|\s*=))*)""", re.IGNORECASE
)
_USERINFO: Final = re.compile(r"^postgres(?:ql)?://([^@/?#]*)@", re.IGNORECASE)
_HIDDEN: Final = "****"


def _passwords(conninfo: str) -> tuple[str, ...]:
    """Every spelling of a password in a Postgres URL or conninfo, longest first.

    The password of ``postgresql://user:PW@host/db``, of ``?password=PW`` and of
    ``password=PW`` or ``password='P W'``, as written, unquoted and
    percent-decoded. A password written with spaces where libpq allows none
    counts whole, and each word of it apart: libpq quotes a URL parameter's
    value whole (``unexpected spaces found in "P W"``) and reads the words after
    an unquoted ``password=P`` as keywords (``missing "=" after "W"``).
    """
    found: set[str] = set()
    userinfo = _USERINFO.match(conninfo)
    if userinfo is not None and ":" in userinfo.group(1):
        found.add(userinfo.group(1).partition(":")[2])
    for token in _PASSWORD.findall(conninfo):
        found.update((token, token.strip("'")))
        found.add(re.sub(r"\\(.)", r"\1", token.strip("'")))
    if _URL.match(conninfo):
        found.update(_URL_PARAMETER.findall(conninfo))
    else:
        for words in _BARE_WORDS.findall(conninfo):
            found.update(words.split())
    found |= {unquote(password) for password in found}
    found |= {word for password in found for word in password.split()}
    return tuple(sorted((p for p in found if p), key=len, reverse=True))


def without_passwords(message: str, conninfo: str) -> str:
    """``message`` with every spelling of ``conninfo``'s password replaced by ``****``.

    A spelling is replaced where no letter or digit is next to it, so a short
    password (``a``) or one that is a word (``host``) hides itself, not every
    word of the message it is part of. A password that stands as a whole word
    of the message is hidden there too: that cannot be told apart from it.

    >>> without_passwords('bad URI: "postgresql://audit:pw%40x@[::1/app"',
    ...                   "postgresql://audit:pw%40x@[::1/app")
    'bad URI: "postgresql://audit:****@[::1/app"'
    """
    for password in _passwords(conninfo):
        message = re.sub(rf"(?<![^\W_]){re.escape(password)}(?![^\W_])", _HIDDEN, message)
    return message


_URL_PARTS: Final = re.compile(r"^postgres(?:ql)?://(?P<hosts>[^/]*)(?P<rest>.*)\Z", re.I | re.S)
_PORT: Final = re.compile(r"(?:\[[^\]]*\]|[^:\[]*)(?::(?P<port>.*))?\Z", re.S)


def misread_password(conninfo: str) -> bool:
    """Whether ``conninfo`` is a URL whose password holds a raw ``/`` or ``@``.

    libpq ends a URL's user info at its first ``@`` or ``/``, whichever comes
    first: in ``postgresql://u:pa/ss@db/app`` the host is ``u``, the port
    ``pa`` and the database ``ss@db/app``; in ``postgresql://u:p@ss@db/app``
    the host is ``ss@db``. Its messages, the pool's warnings and a store's
    ``repr`` then show those pieces of the password as host, port and
    database. The signs, none of which a URL libpq reads as meant shows: an
    ``@`` in the host list or the database name, or a port that is not a
    number while an ``@`` follows (in the query, as in ``u:pa/ss?x@db``;
    a query's own ``@``, ``?user=me@server``, follows a numeric port or none).
    """
    url = _URL_PARTS.match(conninfo)
    if url is None:
        return False
    hosts, rest = url["hosts"], url["rest"]
    user, at, hosts = hosts.rpartition("@")
    if "@" in user or "@" in rest.partition("?")[0]:
        return True
    if at or "@" not in rest:
        return False
    ports = (_PORT.match(host) for host in hosts.split(","))
    return any(p is not None and p["port"] and not p["port"].isdigit() for p in ports)


LIBPQ_KEYWORDS: Final = frozenset(
    [
        "service",
        "user",
        "password",
        "passfile",
        "channel_binding",
        "connect_timeout",
        "dbname",
        "host",
        "hostaddr",
        "port",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "sslmode",
        "sslnegotiation",
        "sslcompression",
        "sslcert",
        "sslkey",
        "sslcertmode",
        "sslpassword",
        "sslrootcert",
        "sslcrl",
        "sslcrldir",
        "sslsni",
        "requirepeer",
        "require_auth",
        "min_protocol_version",
        "max_protocol_version",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "gssencmode",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "replication",
        "target_session_attrs",
        "load_balance_hosts",
        "scram_client_key",
        "scram_server_key",
        "oauth_issuer",
        "oauth_client_id",
        "oauth_client_secret",
        "oauth_scope",
        "sslkeylogfile",
        "requiressl",
    ]
)
"""The keywords of a libpq connection string, as libpq 18 knows them (and ``requiressl``,
which older ones did): known without psycopg, so that a conninfo is told from a path
where the ``postgres`` extra is not installed."""

_C_SPACE: Final = frozenset(" \t\n\v\f\r")
"""What libpq's parser takes for white space (C's ``isspace``), and no other character."""


def refuse_nul(conninfo: str) -> None:
    """Refuse a conninfo holding a NUL character, which libpq would read only up to.

    libpq takes the conninfo as a C string: it ends at the first NUL, and whatever follows
    (a ``dbname``, a ``password``, a ``sslmode=verify-full``) is dropped without a word.
    What veridic read of it (its keywords, a store's ``repr``) and what libpq connects to
    would then differ. The message names the NUL by its position, never the text around
    it, which may hold a password.

    Raises:
        AuditRecordError: ``conninfo`` holds a NUL character.
    """
    at = conninfo.find("\0")
    if at < 0:
        return
    raise AuditRecordError(
        f"the Postgres conninfo holds a NUL character (character {at + 1} of "
        f"{len(conninfo)}): libpq reads a connection string only up to its first NUL and "
        f"would connect without the {len(conninfo) - at - 1} characters after it; remove "
        "the NUL (look for where the conninfo was read or joined: a file or variable "
        "holding a C string's terminator)"
    )


def conninfo_keywords(conninfo: str) -> tuple[str, ...] | None:
    """The keywords of ``conninfo`` read as libpq reads a ``key=value`` connection string.

    ``None`` when libpq's parser would refuse its shape (a word without ``=``, a quoted
    value left open) or it names nothing (empty, or white space). Whether each keyword is
    one libpq knows is left to the caller: a path such as ``/srv/dbname=app/audit.db``
    has the shape (a keyword ``/srv/dbname``), and only that keyword tells it apart.

    Raises:
        AuditRecordError: ``conninfo`` holds a NUL character (:func:`refuse_nul`): libpq
            would read less of it than its keywords say.

    >>> conninfo_keywords("host=db dbname='my app'")
    ('host', 'dbname')
    >>> conninfo_keywords("audit.db") is None
    True
    """
    refuse_nul(conninfo)
    found: list[str] = []
    at = _skip_space(conninfo, 0)
    while at < len(conninfo):
        name_end = at
        while name_end < len(conninfo) and conninfo[name_end] not in _C_SPACE | {"="}:
            name_end += 1
        equals = _skip_space(conninfo, name_end)
        if equals == len(conninfo) or conninfo[equals] != "=":
            return None
        found.append(conninfo[at:name_end])
        at = _value_end(conninfo, _skip_space(conninfo, equals + 1))
        if at < 0:
            return None
        at = _skip_space(conninfo, at)
    return tuple(found) or None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in _C_SPACE:
        at += 1
    return at


def _value_end(text: str, at: int) -> int:
    """Where the value starting at ``at`` ends (libpq's rules), or -1 for a quote left open.

    A quoted value ends at its closing quote (the next keyword may follow at once); an
    unquoted one at white space. In both a backslash takes the next character as it is.
    """
    quoted = at < len(text) and text[at] == "'"
    at += quoted
    while at < len(text):
        if text[at] == "\\":
            at += 2
        elif quoted and text[at] == "'":
            return at + 1
        elif not quoted and text[at] in _C_SPACE:
            return at
        else:
            at += 1
    return -1 if quoted else len(text)
