"""Runs the lit suite's `tinyopt` and `filecheck` commands (and tests/test_bad_inputs.py's
`tinyopt`) in processes forked from one that has imported them.

Each RUN line's `tinyopt` is otherwise a new Python process that spends most of its time (about
0.45 s here, against 0.1 s to 1 s of compiling) importing xDSL, numpy and tinyopt's dialects
and passes before `tinyopt.cli.main` starts; the suite runs it about 210 times, and `filecheck`
(0.15 s of CPU time a process, most of it starting Python) about 250 times. lit.cfg.py starts a
server (`serve`) that imports them once, and puts a `tinyopt` and a `filecheck` first on the RUN
lines' PATH that are small clients (`CLIENT`, compiled with the C compiler where there is one;
else `client`, Python): each hands the server its arguments, working directory, environment
and standard input, output and error (the file descriptors themselves), and the server forks a
child that takes them over and runs the entry point the real script runs (`TOOLS`); the client
exits with the child's status. What a RUN line sees, output and exit
status, is the same; where the server is not running, the client runs the real script.
`start` starts a server and writes its clients.

Off with `TINYOPT_LIT_FORK=0` in the environment of lit (or of pytest, which runs lit). Needs
fork and Unix sockets (Linux, macOS); elsewhere lit.cfg.py leaves the commands as they are.
"""

from __future__ import annotations

# What a client imports is kept to builtin modules (`client`): a RUN line's `tinyopt` or
# `filecheck` starts a Python that runs this module's `client`, and json, socket, signal and
# typing took 24 of its 36 ms of CPU time (2-core VM). The server imports the rest itself.
import _socket
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import subprocess

_HEADER = 8  # bytes: the length of the request
TOOLS = {"tinyopt": ("tinyopt.cli", "main"), "filecheck": ("filecheck.main", "main")}
"""Each command the server runs, by its script's name: the module and function the script
calls."""
PYTHON = "python-c"
"""A client running `python -c CODE` in a child of the server (`_python_c`), of the one that
has imported the most (the capture server, where there is one): the docs' Python blocks."""


FRONTEND = ("torch", "torch.export", "torch._dynamo", "tinyopt.frontends.torch_fx")
"""What `tinyopt capture` imports (torch.export's first call imports torch._dynamo): 2.2 s of
CPU time a capture spent on them where the server had not, 0.2 s left for the capture itself.
The lit suite's and the docs' second servers import them too (`start`'s `capture`), which take
the `tinyopt capture` commands; where torch is not installed they are left out."""


def start(
    folder: str, preload: tuple[str, ...] = (), capture: tuple[str, ...] = ()
) -> list[subprocess.Popen[bytes]] | None:
    """Start a server listening in `folder` and write a client of it there for each of `TOOLS`
    (`folder`/tinyopt, `folder`/filecheck); return the server processes, which the caller stops
    (`terminate`), or None where it cannot run: no fork or Unix sockets, a script missing, or
    no answer in 120 s (then nothing is left running). The server imports the modules named in
    `preload` as well, those that can be imported (e.g. `FRONTEND`), before it answers.

    With `capture` (e.g. `FRONTEND`), a second server that imports those modules too takes
    the `tinyopt capture` commands, the first one every other command: a fork of a process
    that has imported torch cost 50 ms more a command here (a `filecheck` 97 ms against 45 ms,
    2-core VM), which the lit suite's 600 forked commands paid though 11 of them capture."""
    import select
    import shutil
    import socket
    import subprocess

    scripts = {tool: shutil.which(tool, path=os.path.dirname(sys.executable)) for tool in TOOLS}
    if None in scripts.values() or not hasattr(os, "fork") or not hasattr(socket, "AF_UNIX"):
        return None
    addresses = [os.path.join(folder, "socket")]
    loads = [preload]
    if capture:
        addresses.append(os.path.join(folder, "socket-capture"))
        loads.append((*preload, *capture))
    scripts[PYTHON] = sys.executable
    compiling = _compile_client(folder, scripts, addresses)
    servers = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), address, *load],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=os.environ | {"TINYOPT_TUNING_DB": "off"},
        )
        for address, load in zip(addresses, loads)
    ]
    ready = True
    for server in servers:  # they start side by side
        assert server.stdout is not None
        with server.stdout:  # the server prints nothing after "ready"
            answer = select.select([server.stdout], [], [], 120)[0] and server.stdout.readline()
        ready = ready and answer == b"ready\n"
    compiled = compiling is not None and compiling.wait() == 0
    if not ready:
        for server in servers:
            server.terminate()
            server.wait()
        return None
    if compiled:  # one executable, which tells the tools apart by the name it is run as
        for tool in scripts:
            try:
                os.link(os.path.join(folder, "client"), os.path.join(folder, tool))
            except OSError:
                shutil.copy2(os.path.join(folder, "client"), os.path.join(folder, tool))
        return servers
    tests = os.path.dirname(os.path.abspath(__file__))
    for tool, real in scripts.items():
        path = os.path.join(folder, tool)
        # Only `tinyopt` captures: `filecheck` is handed the first server's address alone,
        # `python -c` the last one's.
        routes = ", ".join(f"'{address}'" for address in addresses[: 2 if tool == "tinyopt" else 1])
        routes = f"'{addresses[-1]}'" if tool == PYTHON else routes
        with open(path, "w") as out:
            out.write(
                f'#!/bin/sh\nexec "{sys.executable}" -I -S -c "import sys; sys.path.insert(0, '
                f"'{tests}'); import lit_fork; lit_fork.client('{real}', {routes})\" \"$@\"\n"
            )
        os.chmod(path, 0o755)
    return servers


CLIENT = r"""
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
extern char** environ;
struct tool { const char *name, *real, *address, *capture; };
static const struct tool TOOLS[] = { TABLE };
static char* request;
static size_t used, size;
static void put(const char* text) {
    size_t n = strlen(text) + 1;
    if (used + n > size) {
        size = 2 * (used + n);
        if (!(request = realloc(request, size))) abort();
    }
    memcpy(request + used, text, n);
    used += n;
}
int main(int argc, char** argv) {
    const char* name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const struct tool* tool = 0;
    for (size_t k = 0; k < sizeof TOOLS / sizeof *TOOLS; ++k)
        if (!strcmp(TOOLS[k].name, name)) tool = &TOOLS[k];
    if (!tool) { fprintf(stderr, "lit_fork client: no tool %s\n", name); return 127; }
    const char* address = tool->address;
    if (tool->capture && argc > 1 && !strcmp(argv[1], "capture")) address = tool->capture;
    char count[16], *cwd = getcwd(0, 0);
    snprintf(count, sizeof count, "%d", argc);
    put(count);
    put(tool->real);
    for (int k = 1; k < argc; ++k) put(argv[k]);
    put(cwd ? cwd : "");
    for (char** e = environ; *e; ++e) put(*e);
    struct sockaddr_un server = {0};
    server.sun_family = AF_UNIX;
    int conn = socket(AF_UNIX, SOCK_STREAM, 0);
    if (!cwd || conn < 0 || strlen(address) >= sizeof server.sun_path) goto real;
    strcpy(server.sun_path, address);
    if (connect(conn, (struct sockaddr*)&server, sizeof server) < 0) goto real;
    unsigned char header[8];
    unsigned long long length = used;
    for (int k = 0; k < 8; ++k) header[k] = (unsigned char)(length >> (56 - 8 * k));
    int fds[3] = {0, 1, 2};
    union { char bytes[CMSG_SPACE(sizeof fds)]; struct cmsghdr align; } control;
    memset(&control, 0, sizeof control);
    struct iovec part = {header, sizeof header};
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    struct cmsghdr* rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(rights), fds, sizeof fds);
    if (sendmsg(conn, &message, MSG_NOSIGNAL) != (ssize_t)sizeof header) goto real;
    for (size_t sent = 0; sent < used;) {
        ssize_t n = send(conn, request + sent, used - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) goto real;
        sent += (size_t)n;
    }
    unsigned char status[4];
    for (size_t got = 0; got < sizeof status;) {
        ssize_t n = recv(conn, status + got, sizeof status - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) abort();  /* the child died without a status, of a signal: crash as it did */
        got += (size_t)n;
    }
    unsigned code = (unsigned)status[0] << 24 | status[1] << 16 | status[2] << 8 | status[3];
    exit((int)code);
real:
    argv[0] = (char*)tool->real;
    execv(tool->real, argv);
    perror(tool->real);
    return 127;
}
"""
"""The client as C (`_compile_client`), `client`'s twin: 1.5 ms of CPU time a command where
the Python one (an interpreter started with -I -S) took 14 ms, 2-core VM; the lit suite runs
about 680 of them. `TABLE` becomes each tool's name, real script and server addresses."""


def _compile_client(
    folder: str, scripts: dict[str, str | None], addresses: list[str]
) -> subprocess.Popen[bytes] | None:
    """Start compiling `CLIENT` into `folder`/client with the C compiler (`cc`, else `gcc`);
    None where there is none (the Python clients are written then)."""
    import shutil
    import subprocess

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None

    def literal(text: str | None) -> str:
        if text is None:
            return "0"
        return '"' + "".join(f"\\{byte:03o}" for byte in os.fsencode(text)) + '"'

    rows = []
    for tool, real in scripts.items():
        # Only `tinyopt` captures: `filecheck` is handed the first server's address alone,
        # `python -c` the last one's.
        capture = addresses[1] if tool == "tinyopt" and len(addresses) > 1 else None
        address = addresses[-1] if tool == PYTHON else addresses[0]
        fields = ", ".join(map(literal, [tool, real, address, capture]))
        rows.append(f"{{{fields}}}")
    source = os.path.join(folder, "client.c")
    with open(source, "w") as out:
        out.write(CLIENT.replace("TABLE", ", ".join(rows)))
    return subprocess.Popen(
        [compiler, "-O1", "-o", os.path.join(folder, "client"), source],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Serving:
    """`with Serving() as folder:` a server (`start`) in a fresh temporary folder for the
    block: `folder` holds its clients, or is None where it cannot run (the caller then runs
    the real scripts); on leaving, the server stops and the folder is removed. (A class, not
    a contextlib generator: every client imports this module, and imports cost it time.)"""

    def __init__(self, preload: tuple[str, ...] = (), capture: tuple[str, ...] = ()) -> None:
        self.preload, self.capture = preload, capture  # `start`'s

    def __enter__(self) -> str | None:
        import tempfile

        self.folder = tempfile.mkdtemp(prefix="tinyopt-fork-")
        self.servers = start(self.folder, self.preload, self.capture)
        return self.folder if self.servers is not None else None

    def __exit__(self, *exc: object) -> None:
        import shutil

        for server in self.servers or ():
            server.terminate()
            server.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_SHARED: dict[tuple[str, ...], tuple[Serving, str | None]] = {}
"""The servers `shared` started, by what they preload, with their client folders."""


def shared(preload: tuple[str, ...] = ()) -> str | None:
    """Return the client folder of a server (`Serving`) that preloads `preload`, started on the
    first call and kept until this process exits (None where it cannot run): for tests that
    run `tinyopt` from many test functions, which pytest-xdist hands to a worker in several
    batches (a module-scoped server would be started again for each)."""
    if preload not in _SHARED:
        import atexit

        serving = Serving(preload)
        _SHARED[preload] = (serving, serving.__enter__())
        atexit.register(serving.__exit__)
    return _SHARED[preload][1]


def client(real: str, address: str, capture: str | None = None) -> None:
    """Run the script `real` with `sys.argv[1:]` through the server at `address`, or at
    `capture` for a `tinyopt capture` command where that is given (exec `real` where no server
    answers)."""
    if capture is not None and sys.argv[1:2] == ["capture"]:
        address = capture
    fields = [str(len(sys.argv)), real, *sys.argv[1:], os.getcwd()]
    fields += [f"{key}={value}" for key, value in os.environ.items()]
    data = b"".join(os.fsencode(field) + b"\0" for field in fields)
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.connect(address)
        # socket.send_fds's message: the header, with descriptors 0, 1 and 2 (native ints).
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        header = len(data).to_bytes(_HEADER, "big")
        conn.sendmsg([header], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        conn.sendall(data)
    except OSError:
        os.execv(real, [real, *sys.argv[1:]])
    status = b""
    while len(status) < 4:
        chunk = conn.recv(4 - len(status))
        if not chunk:  # the child died without a status, of a signal: crash as it did
            os.abort()
        status += chunk
    sys.exit(int.from_bytes(status, "big", signed=True))


def serve(address: str, preload: list[str]) -> None:
    """Import the tools and the modules in `preload` that can be imported, listen at
    `address`, print a line when ready, fork a child per request. Exits when the process that
    started it (lit) is gone."""
    import gc
    import importlib
    import select
    import signal
    import socket

    from tinyopt.compiler import context
    from tinyopt.universe import TINYOPT_UNIVERSE

    for module in preload:
        try:
            importlib.import_module(module)
        except ImportError:
            pass

    mains = {
        tool: getattr(importlib.import_module(module), name)
        for tool, (module, name) in TOOLS.items()
    }
    for get in [*TINYOPT_UNIVERSE.all_dialects.values(), *TINYOPT_UNIVERSE.all_passes.values()]:
        get()
    context()  # reads xDSL's multiverse, which the children's `tinyopt` reuses
    # As in tests/conftest.py: what is imported is left out of the cyclic collector's passes,
    # which run every 500 000 allocations (the children inherit both).
    gc.freeze()
    gc.set_threshold(500_000, 50, 100)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print("ready", flush=True)
    while os.getppid() == parent:
        if not select.select([listener], [], [], 1.0)[0]:
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _child(conn, mains)
        conn.close()


def _child(conn: socket.socket, mains: dict) -> None:  # type: ignore[type-arg]
    """Take over the client's request and descriptors, run the tool, send the exit status."""
    import socket

    code = 1
    try:
        header, fds, _, _ = socket.recv_fds(conn, _HEADER, 3)
        size = int.from_bytes(header, "big")
        data = b""
        while len(data) < size:
            data += conn.recv(size - len(data))
        fields = [os.fsdecode(field) for field in data.split(b"\0")[:-1]]
        count = int(fields[0])
        argv, cwd, env = fields[1 : count + 1], fields[count + 1], fields[count + 2 :]
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _reopen_stdio()
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(entry.split("=", 1) for entry in env if "=" in entry)
        sys.argv = argv
        python = sys.argv[0] == sys.executable
        code = _run(_python_c if python else mains[os.path.basename(sys.argv[0])])
    finally:
        try:
            conn.sendall(code.to_bytes(4, "big", signed=True))
        finally:
            os._exit(code)


def _python_c() -> None:
    """`python -c CODE ARGS...` (the request's arguments): CODE run as a fresh `__main__`
    module, with sys.argv `['-c', ARGS...]` and the working directory first on sys.path, as
    the interpreter runs it (no other form of the command)."""
    import types

    if sys.argv[1:2] != ["-c"] or len(sys.argv) < 3:
        raise SystemExit(f"{PYTHON} runs `python -c CODE` only, got {sys.argv[1:]}")
    code = sys.argv[2]
    sys.argv = ["-c", *sys.argv[3:]]
    sys.path[0] = ""
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    exec(compile(code, "<string>", "exec"), main.__dict__)


def _reopen_stdio() -> None:
    """New sys.stdin, stdout and stderr over descriptors 0, 1 and 2, made as the interpreter
    makes them at startup (the server's were made for its own descriptors: whether each is
    seekable, or a terminal and so line-buffered); unbuffered where the server's are
    (`PYTHONUNBUFFERED`)."""
    import io

    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, name)
        unbuffered = isinstance(old.buffer, io.FileIO)
        binary = open(fd, "wb" if fd else "rb", buffering=0 if unbuffered else -1, closefd=False)
        stream = io.TextIOWrapper(
            binary,
            encoding=old.encoding,
            errors=old.errors,
            newline="\n",
            line_buffering=fd > 0 and not unbuffered and (fd == 2 or os.isatty(fd)),
            write_through=old.write_through,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run(main) -> int:  # type: ignore[no-untyped-def]
    """`sys.exit(main())` as the interpreter runs it: the exit status, an uncaught exception's
    traceback and status 1, the streams flushed (status 120 where that fails)."""
    import atexit
    import traceback

    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    return code


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
