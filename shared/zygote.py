"""Processes forked from one pre-imported parent: Warp's and Pattern's MCP servers, and
Shuttle's commands (docs/warp.md, "Many agents on one machine"; docs/pattern.md;
docs/shuttle.md).

A Warp or a Pattern spends most of its start-up importing (the MCP SDK, nats-py, the models:
a second or more of CPU on the two-core machine), and each process keeps a copy of all it
imported. A host that starts many agents pays both per agent. ``warp --zygote SOCKET`` (or
``pattern --zygote SOCKET``) imports all of it once and listens on a Unix socket; a ``warp``
started with ``LOOM_WARP_ZYGOTE=SOCKET`` (a ``pattern`` with ``LOOM_PATTERN_ZYGOTE``) hands
its stdin, stdout and stderr, its arguments, environment and working directory to that
parent, which forks a child that runs exactly as the started process would have (its own
settings, identity and connection; the parent never connects to anything).

The started process stays as the child's stand-in, so whoever started it keeps the handle
it expects: SIGTERM, SIGINT and SIGHUP are passed on, and the child starts with the
dispositions a process of its own would have (SIGINT raises KeyboardInterrupt; one its
starter ignored, ``nohup``, stays ignored unless the program sets a handler of its own, as
uvicorn does), its exit status is the child's (a signal's death included), and when it
dies, even by SIGKILL, the child kills itself.
No zygote answering: the program runs in its own process as always.

This module is the mechanism, and what every such server imports beforehand; ``warp.zygote``
and ``pattern.zygote`` say what else each program imports and sets up in each child. Only
the standard library is imported at module level: the started process's side must stay as
cheap as the start-up it saves.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from shared.footprint import WEBSOCKET_SCHEMES  # standard library only, as this module

if TYPE_CHECKING:
    from shared.mcp.tools import ToolSpec

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""What the stand-in passes on to its child (SIGKILL cannot be caught: the child sees the
stand-in's end of the connection close instead)."""
STDIO = (0, 1, 2)
HEADER = struct.Struct("!I")
MAX_REQUEST = 4 * 1024 * 1024
REQUEST_TIMEOUT_S = 10.0
"""How long the zygote waits for a connected stand-in's request before dropping it."""
BACKLOG = 128
NAMESPACES = ("net", "mnt", "user", "pid")


class Program(NamedTuple):
    """What a zygote forks: the program's name (its log lines say it), the variable that
    points its started processes at a zygote, what to import before forking (an agent's MCP
    server: :func:`agent_server_preload`), and what each child sets up before it runs (given
    the connection to its stand-in and the request).
    (A named tuple, not a dataclass: ``dataclasses`` would cost every stand-in 5 ms.)"""

    name: str
    env: str
    preload: Callable[[], None]
    in_child: Callable[[socket.socket, dict[str, Any]], None] = lambda _conn, _request: None


# -- the started process's side --------------------------------------------------------


def start(
    program: Program, zygote: str | None, argv: list[str] | None, run: Callable[[list[str]], int]
) -> int | None:
    """A program's first step in its ``main``: with ``--zygote SOCKET`` (``zygote``), serve
    as the zygote; started with ``program.env`` naming one, stand in for the child it forks
    (its exit status). None: the caller runs the program itself (no zygote took it, and
    stderr says so)."""
    if zygote is not None:
        return serve(zygote, program, run)
    path = os.environ.get(program.env)
    if not path:
        return None
    code = hand_off(path, [sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    if code is None:
        said = f"no zygote at {program.env} took it (its log says why); starting on its own"
        print(f"{program.name}: {said}", file=sys.stderr)
    return code


def console_main(program: Program, run_here: Callable[[], None]) -> int:
    """The whole ``main`` of a console script that leaves its arguments to its CLI (``weft``,
    ``shuttle``): ``PROGRAM --zygote SOCKET`` serves as the zygote; any other command is
    forked from the zygote ``program.env`` names, else runs here (``run_here`` reads
    ``sys.argv``, which the zygote sets in a child as it was in the started process)."""

    def run(_argv: list[str]) -> int:
        run_here()
        return 0

    args = sys.argv[1:]
    zygote = args[1] if len(args) == 2 and args[0] == "--zygote" else None
    code = start(program, zygote, None, run)
    return run(args) if code is None else code


def hand_off(path: str, argv: list[str]) -> int | None:
    """Run this process's program as a child of the zygote listening at ``path`` and stand
    in for it until it ends: its exit status, or None when no zygote took it (the caller
    runs the program itself; nothing of this process's was touched)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        place = {
            "argv": argv,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "namespaces": namespaces(),
            "host": os.getppid(),  # who started this process: the child's agent host
            "ignored": [int(sig) for sig in FORWARDED if signal.getsignal(sig) is signal.SIG_IGN],
        }
        request = json.dumps(place).encode()
        fds = array.array("i", STDIO)
        conn.sendmsg([HEADER.pack(len(request)), request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        replies = conn.makefile("rb")
        started = replies.readline()
    except OSError:
        conn.close()
        return None
    if not started:
        conn.close()  # the zygote went away before forking: nothing was started
        return None
    _let_go_of_stdio()

    def pass_on(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):  # the child is gone already; its status is on its way
            conn.sendall(f"{signum}\n".encode())

    # Every one, even one its starter ignored: the child ignores that one too, unless its
    # program sets a handler of its own, as a process of its own would (uvicorn does).
    for sig in FORWARDED:
        signal.signal(sig, pass_on)
    try:
        ended = replies.readline()
    finally:
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
    conn.close()
    code = int(json.loads(ended)["exit"]) if ended else 1
    if code < 0:  # the child died of a signal: so does its stand-in
        os.kill(os.getpid(), -code)
    return code


def namespaces() -> dict[str, str]:
    """The Linux namespaces this process runs in (network, mounts, users, processes), as
    /proc names them; empty where there is no /proc. A child is forked in the zygote's, so
    a process started elsewhere (``ip netns exec``, a container) is refused and runs on
    its own."""
    found = {}
    for kind in NAMESPACES:
        with contextlib.suppress(OSError):
            found[kind] = os.readlink(f"/proc/self/ns/{kind}")
    return found


def _let_go_of_stdio() -> None:
    """The child holds the pipes now. Closed here (on /dev/null instead), the reader of its
    stdout sees the end when the child's output ends, as with a process of its own."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)


# -- the zygote ----------------------------------------------------------------------


def serve(path: str, program: Program, run: Callable[[list[str]], int]) -> int:
    """Import what ``program`` imports, then fork one child per request on ``path`` until
    SIGTERM or SIGINT; then stop listening and wait for the children still running. A child
    calls ``run`` with its arguments (the program's ``main``, which hands it here)."""
    os.environ.pop(program.env, None)
    zygote = Zygote(program, run)  # its signal handlers first: a SIGTERM from here on is a clean stop
    program.preload()
    listener = _listening_at(path)
    try:
        zygote.run(listener)
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return 0


def agent_server_preload(own: Callable[[], Iterable[ToolSpec]]) -> Callable[[], None]:
    """The preload of an agent's stdio MCP server (Warp, Pattern): the optional libraries
    left out first, then ``own`` (the program's own modules; it returns the program's tools),
    what every such server imports before it answers and once connected (its CLI's lazy
    imports), and the tools' schemas built, so that each child starts with all of it in
    place. Only modules that hold no per-process state, or renew it in each child."""

    def preload() -> None:
        from shared.footprint import leave_out_unused_imports

        leave_out_unused_imports(None)  # aiohttp too: a child whose NATS is ws:// runs on its own
        tools = own()
        import mcp.server.mcpserver  # noqa: F401
        import uvloop  # noqa: F401

        import shared.errors
        import shared.identity
        import shared.legacy
        import shared.nats.auth
        import shared.redact
        import shared.settings
        import shared.trace.tracing  # noqa: F401
        from shared.loop import keep_startup_heap
        from shared.mcp.tools import prepare

        prepare(tools)  # every tool's schema and validator, built once for all the children
        keep_startup_heap()  # frozen before forking: no child's collector touches (and copies) it

    return preload


def _listening_at(path: str) -> socket.socket:
    """A socket listening at ``path``, which appears only once it listens: bound under a
    name beside it and renamed (a connection to a socket bound but not yet listening is
    refused, and a starter that saw the path would run on its own)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}~"
    for stale in (staging, path):  # left by a zygote that was killed
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    old_umask = os.umask(0o177)  # the socket is its owner's alone: it starts agents' servers
    try:
        listener.bind(staging)
    finally:
        os.umask(old_umask)
    listener.listen(BACKLOG)
    os.rename(staging, path)
    return listener


class Zygote:
    """The parent's loop: accept a request, fork its child, report each child's exit to
    its stand-in. Single-threaded, so forking is safe."""

    listener: socket.socket  # bound once the program's modules are imported: given to ``run``

    def __init__(self, program: Program, run: Callable[[list[str]], int]) -> None:
        """Catch SIGTERM, SIGINT and SIGCHLD at once, before the socket is bound: a signal
        sent as soon as the socket appears must find the handlers in place."""
        self.program = program
        self.run_program = run
        self.children: dict[int, socket.socket] = {}
        self.stopping = False
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._note)

    def run(self, listener: socket.socket) -> None:
        self.listener = listener
        with self.selector as selector:
            selector.register(self.listener, selectors.EVENT_READ, "accept")
            selector.register(self.wake_r, selectors.EVENT_READ, "signal")
            while not (self.stopping and not self.children):
                for key, _ in selector.select():
                    if key.data == "accept" and not self.stopping:
                        self._accept()
                    elif key.data == "signal":
                        self._drain_signals(selector)
                self._reap()

    def _say(self, line: str) -> None:
        print(f"{self.program.name} zygote: {line}", file=sys.stderr, flush=True)

    def _note(self, signum: int, _frame: Any) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True

    def _drain_signals(self, selector: selectors.BaseSelector) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass
        if self.stopping and self.listener.fileno() >= 0:
            selector.unregister(self.listener)
            self.listener.close()

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            request, fds = _read_request(conn)
        except (OSError, ValueError) as exc:
            self._say(f"request refused: {type(exc).__name__}: {exc}")
            conn.close()
            return
        pid = os.fork()
        if pid == 0:  # the child: never returns into this loop
            code = 1
            try:
                code = self._become_child(conn, fds, request)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        self._say(f"child {pid} started")
        with contextlib.suppress(OSError):  # its stand-in is gone: the child sees that and ends
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            self._say(f"child {pid} ended ({code})")
            with contextlib.suppress(OSError):  # its stand-in died first (so the child was told to end)
                conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
            conn.close()

    def _become_child(self, conn: socket.socket, fds: list[int], request: dict[str, Any]) -> int:
        """In the forked child: take the stand-in's stdio, environment and place, drop the
        parent's, and run the program with its arguments."""
        signal.set_wakeup_fd(-1)
        _as_started(request.get("ignored", []))
        self.listener.close()
        self.selector.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        for other in self.children.values():
            other.close()
        os.setsid()  # a session of its own, as a process started on its own has from its host
        for target, fd in zip(STDIO, fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            if fd not in STDIO:
                os.close(fd)
        env = {str(k): str(v) for k, v in dict(request["env"]).items() if k != self.program.env}
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        argv = [str(a) for a in request["argv"]]
        sys.argv = argv
        self.program.in_child(conn, request)
        threading.Thread(target=_lifeline, args=(conn,), name="zygote-lifeline", daemon=True).start()
        try:
            code = self.run_program(argv[1:])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        import logging

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        return code


def _as_started(ignored: list[int]) -> None:
    """The signal handling of a process of its own, as Python sets it up at start: SIGINT
    raises KeyboardInterrupt (a command exits 130, a server stops as it does on Ctrl-C), the
    others take their default, and what the stand-in's starter ignored stays ignored."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for sig in FORWARDED:
        if int(sig) in ignored:
            signal.signal(sig, signal.SIG_IGN)
        elif sig == signal.SIGINT:
            signal.signal(sig, signal.default_int_handler)
        else:
            signal.signal(sig, signal.SIG_DFL)


def _peer_pid(conn: socket.socket) -> int:
    """The process at the other end of ``conn``: the stand-in (``SO_PEERCRED``)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, _uid, _gid = struct.unpack("3i", creds)
    return int(pid)


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The stand-in's request and the three descriptors sent with it; the request gains the
    stand-in's process id (``stand_in``), the kernel's word, not the request's."""
    conn.settimeout(REQUEST_TIMEOUT_S)
    stand_in = _peer_pid(conn)
    fds = array.array("i")
    header, ancillary, _, _ = conn.recvmsg(HEADER.size, socket.CMSG_SPACE(len(STDIO) * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    received = list(fds)
    try:
        if len(header) != HEADER.size or len(received) != len(STDIO):
            raise ValueError("a request carries a length and the three standard descriptors")
        (size,) = HEADER.unpack(header)
        if size > MAX_REQUEST:
            raise ValueError(f"a request is at most {MAX_REQUEST} bytes")
        body = b""
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("the request ended early")
            body += chunk
        request = json.loads(body)
        if not isinstance(request, dict) or not {"argv", "env", "cwd", "namespaces", "host"} <= set(request):
            raise ValueError("a request names argv, env, cwd, namespaces and host")
        if not isinstance(request["host"], int) or isinstance(request["host"], bool):
            raise ValueError("a request's host is a process id")
        ignored = request.get("ignored", [])
        if not isinstance(ignored, list) or not all(type(sig) is int for sig in ignored):
            raise ValueError("a request's ignored signals are a list of signal numbers")
        if request["namespaces"] != namespaces():
            raise ValueError("started in other namespaces than the zygote's: it runs on its own")
        # nats-py's WebSocket transport (aiohttp, 16 MB in every child) is left out
        values = [str(value).lower() for value in dict(request["env"]).values()]
        if any(scheme in value for value in values for scheme in WEBSOCKET_SCHEMES):
            raise ValueError("a WebSocket NATS URL needs the transport the zygote left out: on its own")
    except BaseException:
        for fd in received:
            os.close(fd)
        raise
    conn.settimeout(None)
    request["stand_in"] = stand_in
    return request, received


def die_if_stand_in_gone(conn: socket.socket) -> None:
    """In the child, when its input ends: a host that killed the stand-in closes the pipes
    it gave it only after reaping it, so the stand-in's end of ``conn`` has closed by then
    (the kernel closes it as the stand-in dies). The lifeline thread may not have run yet
    (it needs the interpreter, which a busy machine can keep from it): the child dies here
    as killed, instead of stopping as a server whose session ended (a Warp deregisters)."""
    try:
        waiting = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return  # the stand-in is alive: the session ended as sessions do
    except OSError:
        waiting = b""
    if not waiting:
        os.kill(os.getpid(), signal.SIGKILL)


def _lifeline(conn: socket.socket) -> None:
    """In the child: the signals its stand-in passes on; its end closing (the stand-in died,
    however) ends the child too."""
    pending = b""
    while True:
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if not data:
            os.kill(os.getpid(), signal.SIGKILL)
            return
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            with contextlib.suppress(ValueError):
                os.kill(os.getpid(), int(line))
