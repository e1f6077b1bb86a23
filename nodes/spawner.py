"""Start peers from one pre-imported Python process, so that ``crc launch`` pays the interpreter's start-up once.

A peer is still a separate OS process with its own sockets; only the way it starts changes. Instead of
``exec``-ing ``python -I -m crc node ...`` for every peer (≈0.4 s of imports each), the launcher starts
one helper, ``python -I -m crc.nodes.spawner FD``, which imports what a peer needs (numpy, the crc core,
the peer, the wire, the zmq module and the ``crc`` command), creates no ZeroMQ context and no thread, and
then forks one child per peer. A child gets the standard input, output and error the launcher sends it
and runs the peer's command line (``crc.nodes.launcher.node_command``, the one description of a peer)
exactly as ``python -I -m crc`` would: ``crc/__main__.py`` with that argument list, exit status from
its ``SystemExit``. Children stay in the launcher's process group, as ``subprocess.Popen`` children
were, so that a Ctrl-C reaches every peer (each writes its checkpoint and exits 130).

Why not ``multiprocessing.get_context("forkserver")``: its server is one per process, its preload list,
environment and lifetime are fixed by whoever starts it first and it outlives the launch; every child
re-imports the launching program's ``__main__`` (an unguarded script calling ``launch()`` would re-run
in every peer); and if the server dies, every child still running reports exit code 255, so a launcher
could no longer tell running peers from dead ones and would stop reaping them. Here the helper is one
per launch, runs with single-threaded BLAS, and hands the launcher a pidfd of every child (opened
before the helper can reap it, so never another process's): the launcher waits for, signals and kills
its peers through those even if the helper has died (only their exit codes are then unknown: None).

The helper and the launcher talk over a SOCK_SEQPACKET socket pair, one JSON object per packet:
the helper sends ``{"ready": pid, "threads": n}`` once; the launcher sends ``{"argv": [...]}`` with
three descriptors (stdin, stdout, stderr) and gets ``{"started": pid}`` with the child's pidfd (or
``{"error": message}``); ``{"exited": pid, "code": c, "cpu_s": t}`` follows when the helper has reaped a
child (``c`` as ``subprocess`` reports it, negative for a signal; ``t`` its user + system CPU seconds).
When the launcher's end closes, the helper stops the children still running (SIGTERM, then SIGKILL) and
exits: peers never outlive a launcher that was killed.
"""

from __future__ import annotations

import array
import contextlib
import gc
import importlib
import json
import math
import os
import runpy
import select
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback

from crc.core.errors import CRCError

SINGLE_THREADED = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Set for the helper before it imports numpy: many peers share few cores, so no peer's BLAS starts threads."""

PRELOAD = ("numpy", "zmq", "msgpack", "encodings.utf_8_sig", "crc.core.model_file", "crc.nodes.peer", "crc.nodes.transport",
           "crc.nodes.wire", "crc.nodes.local_data", "crc.nodes.checkpoint", "crc.nodes.node", "crc.cli.main", "crc.cli.peer")
"""What the helper imports before forking: everything ``crc node`` imports. The helper is an entry point
like ``crc/__main__.py`` (it runs the ``crc`` command line), so it may import the command by name; no
library module imports it. Not numpy.random (circuits use it): importing it seeds a global generator,
which forked children would then share."""

STOP_GRACE_S = 3.0
"""Seconds the helper lets its children exit after SIGTERM (when the launcher is gone) before SIGKILL."""

MAX_REQUEST = 1 << 20
"""Bytes of a request (a peer's command line); replies are small."""
MAX_REPLY = 1 << 12


def supported() -> bool:
    """Whether this platform can run the helper: fork, pidfds (Linux 5.3) and descriptor passing."""
    needed = [(os, "fork"), (os, "pidfd_open"), (signal, "pidfd_send_signal"), (socket, "send_fds"), (socket, "SOCK_SEQPACKET")]
    if not all(hasattr(module, name) for module, name in needed):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def _send(sock: socket.socket, message: dict, fds=()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _receive(sock: socket.socket, size: int, maxfds: int, flags: int = 0) -> tuple[bytes, list[int]]:
    """One packet and the descriptors that came with it (socket.recv_fds ignores its flags before Python 3.13)."""
    fds = array.array("i")
    data, ancillary, _, _ = sock.recvmsg(size, socket.CMSG_SPACE(maxfds * fds.itemsize), flags)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


def _readable(fds, timeout: float | None) -> list[int]:
    """The descriptors among ``fds`` that are readable (or closed) within ``timeout`` seconds (poll: no FD_SETSIZE limit)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(None if timeout is None else max(0, math.ceil(timeout * 1000)))]


# --------------------------------------------------------------------------------------------- launcher side


class Child:
    """A peer started by the helper, used like ``subprocess.Popen``; ``exited`` tells whether it has ended.

    ``returncode`` is None while it runs, and stays None if it ended after the helper died (the exit
    code is then unknown).
    """

    def __init__(self, spawner: Spawner, pid: int, pidfd: int, args: list[str]):
        self.pid, self.args, self.returncode, self.exited = pid, args, None, False
        self.cpu_seconds: float | None = None
        """User + system CPU seconds it used, once it has ended (None if unknown)."""
        self._spawner, self._pidfd = spawner, pidfd

    def _ended(self, code: int | None, cpu_seconds: float | None = None) -> None:
        self.returncode, self.exited, self.cpu_seconds = code, True, cpu_seconds
        self._close()

    def _close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def poll(self) -> int | None:
        if not self.exited:
            self._spawner.pump(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, waiting at most ``timeout`` seconds (subprocess.TimeoutExpired after that)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.exited:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._spawner.pump(remaining)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.exited or self._pidfd is None:
            return
        with contextlib.suppress(ProcessLookupError):  # it has ended; its exit is being reported
            signal.pidfd_send_signal(self._pidfd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Spawner:
    """The helper process of one launch; use as a context manager (closing it ends the helper).

    ``env``: the helper's (and so its children's) environment, by default this process's with
    ``SINGLE_THREADED``. ``ready_timeout``: seconds the helper may take to import everything.
    """

    def __init__(self, *, env: dict | None = None, ready_timeout: float = 60.0):
        self.ready_timeout = ready_timeout
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # -I as in node_command: the installed crc, never a checkout that happens to be the working directory.
            self.process = subprocess.Popen([sys.executable, "-I", "-m", __spec__.name, str(theirs.fileno())],
                                            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            env=env if env is not None else {**os.environ, **SINGLE_THREADED})
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.pid = self.process.pid
        self._socket: socket.socket | None = ours
        self._children: dict[int, Child] = {}
        self._pending: list[str] | None = None  # the command line of the start awaiting its reply
        self._reply: Child | dict | None = None
        self.ready = False
        self.threads: int | None = None
        """Threads of the helper when it was ready to fork (1: none but its own)."""

    @property
    def alive(self) -> bool:
        """Whether the helper can still start peers and report their exits."""
        return self._socket is not None

    def _lost(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def pump(self, timeout: float | None) -> None:
        """Handle what the helper reported, waiting at most ``timeout`` seconds for something to happen."""
        if self._socket is None:
            self._watch_orphans(timeout)
            return
        ready = _readable([self._socket.fileno()], timeout)
        while ready and self._socket is not None:
            try:
                data, fds = _receive(self._socket, MAX_REPLY, 1, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                for fd in fds:
                    os.close(fd)
                self._lost()
                return
            self._handle(json.loads(data), fds)

    def _handle(self, message: dict, fds: list[int]) -> None:
        if "exited" in message:
            child = self._children.get(message["exited"])
            if child is not None:
                child._ended(message["code"], message.get("cpu_s"))
        elif "ready" in message:
            self.ready, self.threads = True, message.get("threads")
        elif "started" in message and len(fds) == 1 and self._pending is not None:
            # Registered at once: its exit may be reported in the very next packet.
            self._reply = self._children[message["started"]] = Child(self, message["started"], fds[0], self._pending)
            return
        elif "started" in message:  # the helper stops it when it is closed
            self._reply = {"error": "its pidfd did not arrive (too many open files? see ulimit -n)"}
        else:
            self._reply = message
        for fd in fds:
            os.close(fd)

    def _watch_orphans(self, timeout: float | None) -> None:
        """The helper is gone: a child has ended when its pidfd is readable (its exit code is unknown)."""
        running = {child._pidfd: child for child in self._children.values() if not child.exited and child._pidfd is not None}
        if not running:
            if timeout:
                time.sleep(timeout)
            return
        for fd in _readable(running, timeout):
            running[fd]._ended(None)

    def _wait_for(self, what: str, done, deadline: float) -> None:
        while not done():
            if self._socket is None:
                code = self.process.poll()
                raise CRCError(f"the peer spawner (pid {self.pid}) exited{'' if code is None else f' with code {code}'} "
                               f"before {what}; its errors are on standard error")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CRCError(f"the peer spawner (pid {self.pid}) did not answer within {self.ready_timeout:g} s ({what})")
            self.pump(remaining)

    def wait_ready(self) -> None:
        """Wait (at most ``ready_timeout`` seconds) until the helper has imported everything and can fork."""
        self._wait_for("it was ready", lambda: self.ready, time.monotonic() + self.ready_timeout)

    def start(self, argv: list[str], *, stdin, stdout, stderr) -> Child:
        """Start a child running ``argv`` (``[sys.executable, "-I", "-m", module, *args]`` runs in the pre-imported
        helper, anything else is exec-ed) with the given standard streams (files or descriptors)."""
        deadline = time.monotonic() + self.ready_timeout
        self._wait_for("it was ready", lambda: self.ready, deadline)
        fds = [stream if isinstance(stream, int) else stream.fileno() for stream in (stdin, stdout, stderr)]
        self._pending, self._reply = [str(arg) for arg in argv], None
        try:
            _send(self._socket, {"argv": self._pending}, fds)
        except OSError:
            self._lost()
        try:
            self._wait_for("starting a peer", lambda: self._reply is not None, deadline)
        finally:
            reply, self._pending, self._reply = self._reply, None, None
        if not isinstance(reply, Child):
            raise CRCError(f"the peer spawner could not start {' '.join(argv[4:6]) or argv}: {reply.get('error', reply)}")
        return reply

    def close(self, timeout: float = 10.0) -> None:
        """End the helper: it stops its children still running (SIGTERM, then SIGKILL) and exits."""
        self._lost()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for child in self._children.values():
            child._close()

    def __enter__(self) -> Spawner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------- helper side


def _exit_code(code) -> int:
    """The exit status Python gives ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run(argv: list[str]) -> int:
    """Run ``argv`` in this (forked) process; returns its exit status."""
    if len(argv) >= 4 and argv[:3] == [sys.executable, "-I", "-m"]:
        sys.argv = [argv[3], *argv[4:]]  # run_module puts the module's file in sys.argv[0], as -m does
        try:
            runpy.run_module(argv[3], run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            return _exit_code(stop.code)
        except KeyboardInterrupt:  # as an interpreter does: die of SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return 0
    os.execvp(argv[0], argv)  # another program: run it as it is, without the pre-imported modules
    return 1  # not reached


def _child(argv: list[str], fds: list[int], inherited: list[int]) -> None:
    """In the forked child: drop the helper's descriptors, take the given standard streams, run, never return."""
    code = 1
    try:
        for fd in inherited:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            os.close(fd)
        code = _run(argv)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _signal_all(pidfds, signum: int) -> None:
    for pidfd in pidfds:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signum)


def _stop(children: dict[int, int]) -> None:
    """Stop the children still running (pidfd -> pid): SIGTERM, SIGKILL after STOP_GRACE_S, and reap them."""
    _signal_all(children, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while children:
        ready = _readable(children, max(0.0, deadline - time.monotonic()))
        if not ready:
            _signal_all(children, signal.SIGKILL)
            ready = list(children)
        for pidfd in ready:
            os.waitpid(children.pop(pidfd), 0)
            os.close(pidfd)


def serve(sock: socket.socket) -> None:
    """The helper's loop: fork a child per request, report its exit; stop everything when the launcher is gone."""
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    children: dict[int, int] = {}  # pidfd -> pid
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj is sock:
                    try:
                        data, fds = _receive(sock, MAX_REQUEST, 3)
                    except OSError:
                        data, fds = b"", []
                    if not data:
                        for fd in fds:
                            os.close(fd)
                        return
                    try:
                        argv = json.loads(data)["argv"]
                        if len(fds) != 3 or not argv or not all(isinstance(arg, str) for arg in argv):
                            raise ValueError("a request is an argument list and three descriptors")
                        sys.stdout.flush()
                        sys.stderr.flush()
                        pid = os.fork()
                        if pid == 0:
                            _child(argv, fds, [sock.fileno(), selector.fileno(), *children])
                        try:
                            pidfd = os.pidfd_open(pid)  # before any waitpid: it cannot name another process
                        except OSError:  # untracked, it must not run
                            os.kill(pid, signal.SIGKILL)
                            os.waitpid(pid, 0)
                            raise
                    except Exception as exc:  # reported to the launcher, which raises
                        reply, passed = {"error": f"{type(exc).__name__}: {exc}"}, []
                    else:
                        children[pidfd] = pid
                        selector.register(pidfd, selectors.EVENT_READ)
                        reply, passed = {"started": pid}, [pidfd]
                    finally:
                        for fd in fds:
                            os.close(fd)
                    try:
                        _send(sock, reply, passed)
                    except OSError:
                        return
                else:
                    pidfd = key.fd
                    selector.unregister(pidfd)
                    pid = children.pop(pidfd)
                    _, status, usage = os.wait4(pid, 0)
                    os.close(pidfd)
                    try:
                        _send(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status),
                                     "cpu_s": usage.ru_utime + usage.ru_stime})
                    except OSError:
                        return
    finally:
        _stop(children)
        selector.close()


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    import resource  # POSIX only, as the helper is

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):  # it holds a pidfd per peer
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the peers and the launcher, which reaps them
    for name in PRELOAD:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the children share these objects' pages rather than copy them when the collector runs
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        threads = None
    try:
        _send(sock, {"ready": os.getpid(), "threads": threads})
    except OSError:
        return
    serve(sock)


if __name__ == "__main__":
    main()
