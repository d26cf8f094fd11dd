"""The ``pcreg`` command line (argparse; heavy imports happen inside the subcommands).

Each subcommand lives in :mod:`pcreg.commands` (``add_parser(sub)`` wires its arguments, its
handler is a thin wrapper over a library function); this module builds the parser, sets up
logging and maps errors to exit codes.

Exit codes: 0 ok; 2 bad input, one line naming the file (or argument) and the problem; 3 the
registration ran but did not register (``registered: false`` and the reason); 4 ``batch``
finished with pairs that failed (an error, no result; one line counts them); 130 interrupted,
143 terminated (SIGTERM; temporary files are removed either way); 1 an internal error (a bug:
please report it with the ``-v`` traceback).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import threading

__all__ = ["build_parser", "main"]

logger = logging.getLogger("pcreg")


def build_parser() -> argparse.ArgumentParser:
    from pcreg.commands import (
        batch,
        benchmark,
        demo,
        evaluate,
        odometry,
        register,
        serve,
        train,
        view,
    )
    from pcreg.commands import map as map_command  # "map" would hide the builtin here
    from pcreg.commands._parser import OneLineParser

    parser = OneLineParser(prog="pcreg", description="3-D point-cloud registration.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    # the order of the help listing: benchmark, register, batch, manifest, odometry, view,
    # demo, vit, detr, train, evaluate, evaluate-log; map after odometry
    for command in (
        benchmark,
        register,
        batch,
        odometry,
        map_command,
        view,
        demo,
        train,
        evaluate,
        serve,
    ):
        command.add_parser(sub)
    # -v also after the subcommand (`pcreg register SRC REF -v`, as a bug report's command
    # line is usually written); SUPPRESS: absent there, it leaves the top level's value. Not
    # on the commands that pass their words on (Hydra overrides, a nested parser: vit, detr)
    for command_parser in {id(p): p for p in sub.choices.values()}.values():
        own = set(command_parser._option_string_actions)
        if "-v" not in own and not own <= {"-h", "--help"}:
            command_parser.add_argument("-v", "--verbose", action="store_true",
                                        default=argparse.SUPPRESS,
                                        help="debug logging on stderr (as pcreg -v)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None, served_here: bool = False) -> int:
    """Entry point of the ``pcreg`` console script. Returns the process exit code.
    ``served_here``: called by ``pcreg serve`` itself (never forwarded again).

    After SIGTERM / SIGHUP the process leaves here, once Python's exit handlers have run
    (:func:`_leave_after_signal`). The signals are taken over from the first moment: one
    while the request was offered to a server or the parser was built (its subcommands'
    imports, the first 0.05-0.5 s) killed the process the default way, without pcreg's
    line."""
    from pcreg._fs import Terminated, forget_signals, received_signal, signals_raise

    if not served_here:  # a signal an earlier call in this process took is not this one's
        forget_signals()
    try:
        with signals_raise(quiet_stderr=True):  # the command's own block nests inside
            code = _main(argv, served_here)
    except BaseException as err:  # before the command's block: forwarding, parsing, set-up
        signum = received_signal()
        if signum is None or isinstance(err, KeyboardInterrupt):
            raise  # argparse's SystemExit (usage, --help) and the rest, as before
        terminated = err if isinstance(err, Terminated) else Terminated(signum)
        code = _fail(str(terminated), int(terminated.code))
    if not served_here and received_signal() is not None:
        _leave_after_signal(code)
    return code


def entry() -> None:
    """The ``pcreg`` executable and ``python -m pcreg``: :func:`main`, then out of the process
    at once (:func:`_leave_after_signal`: Python's exit handlers, the streams flushed, then
    ``os._exit``), without the interpreter's and the C++ libraries' teardown. Why:

    * a signal after the command's own handlers are gone (its outputs written, its summary
      printed) met the default action in that teardown: ``pcreg batch`` SIGTERMed just after
      its summary line died silently in 3 of 3 tries (a hostile run). Until the exit such a
      signal is recorded and ends the process with its code and one line;
    * the teardown itself: a whole ``pcreg register`` on the 3DMatch pair took 0.705 s with
      it and 0.640 s without (medians of 5, alternating, 2-core AMD EPYC).

    Not :func:`main` itself: the tests and ``pcreg serve`` call it in-process."""
    import signal

    late: list[int] = []

    def record(signum: int, _frame: object) -> None:
        late.append(signum)

    try:
        code = main()
    except KeyboardInterrupt:  # Ctrl-C before pcreg took the signals over (Python's import)
        code = _fail("interrupted", 130)
    except SystemExit as stop:  # argparse's --help and usage errors, already printed
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if isinstance(stop.code, str):
            sys.stderr.write(stop.code + "\n")
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGHUP", "SIGINT"):
            signum = getattr(signal, name, None)
            if signum is not None:
                signal.signal(signum, record)
    try:
        import atexit

        atexit._run_exitfuncs()  # Ray's shutdown, logging's flush: under the recording handler
    except BaseException:
        pass
    if late:
        from pcreg._fs import Terminated

        terminated = Terminated(late[0])
        code = _fail(str(terminated), int(terminated.code))
    _leave_after_signal(code)


def _leave_after_signal(code: int) -> None:
    """Exit with ``code`` without the C++ libraries' static destructors. Open3D's memory
    statistic (``MemoryManagerStatistic::~MemoryManagerStatistic``) calls ``exit(1)`` when
    any of its tensors is still allocated, and a signal that interrupts Open3D leaves some:
    a SIGTERMed ``pcreg register`` exited 1 instead of 143 in 3 of 40 runs (strace: the
    ``exit_group(1)`` came from that destructor). Python's own exit handlers (Ray's
    shutdown, logging) run first; the temporary files are gone already (``finally``)."""
    import atexit

    try:
        atexit._run_exitfuncs()  # what interpreter shutdown would run before the destructors
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BaseException:
        pass
    os._exit(code)


def _main(argv: list[str] | None, served_here: bool) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not served_here:  # a running `pcreg serve` takes `pcreg register` (commands/_client)
        from pcreg.commands._client import forward

        code = forward(argv)
        if code is not None:
            return code
    from pcreg.commands._parser import ArgumentExit

    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # the subcommand's parser says so, and points at its own --help
            commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            commands.choices.get(args.command, parser).error(
                f"unrecognized arguments: {' '.join(extra)}"
            )
    except ArgumentExit as err:  # the line is on stderr; a script reading --json gets it too
        if "--json" in argv and sys.stdout is not None:
            _json_error(err.line.split(": error: ", 1)[-1], 2)
        raise
    args.argv = argv  # recorded in benchmark tables
    args.main = main  # `pcreg serve` runs each request through this entry point
    logging.basicConfig(
        # progress and notes only with -v: stderr holds warnings and the one-line errors
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # The command line keeps freed memory in the heap (pcreg/engine/heap.py: large tensors are
    # not page-faulted anew each registration); a library caller opts in itself.
    # PCREG_RETAIN_HEAP=0 leaves malloc alone.
    from pcreg.engine.heap import retain_freed_memory

    retain_freed_memory()
    if not args.verbose:  # Ray's start-up notes (e.g. its token authentication) are not ours
        logging.getLogger("ray").setLevel(logging.ERROR)
    logging.captureWarnings(True)  # third-party warnings: one log line, shown with -v only
    logging.getLogger("py.warnings").setLevel(logging.DEBUG if args.verbose else logging.ERROR)
    if sys.stdout is None:  # started with stdout closed (>&-): every command writes to it
        return _fail("error: stdout: standard output is closed", 2)
    from pcreg._fs import Terminated, raise_if_signalled, received_signal, signals_raise

    stdout = sys.stdout
    sys.stdout = _NamedStream(stdout, "stdout")  # a full or closed stdout names itself
    try:
        # SIGTERM / SIGHUP: finally blocks remove temporary files, and the one line pcreg
        # prints is the only one (the libraries' C++ shutdown messages are silenced)
        with signals_raise(quiet_stderr=True):
            code = int(args.func(args))
            raise_if_signalled()  # a signal a library swallowed ends the run all the same
        _flush_stdout()
        return code
    except BaseException as err:
        # with --json, a script reading stdout gets an object there too, unless the command
        # wrote its own (a refusal's record)
        as_json = (  # `detr predict` parses its own options, --json among them
            getattr(args, "json", False) is True or "--json" in getattr(args, "overrides", ())
        ) and not getattr(sys.stdout, "written", True)
        if isinstance(err, ArgumentExit):  # a command's own parser (`detr predict`): its
            if as_json:  # line is on stderr already; a script reading --json gets it too
                _json_error(err.line.split(": error: ", 1)[-1], 2)
            raise err
        signum = received_signal()
        if isinstance(err, Terminated):  # Ctrl-C (SIGINT), SIGTERM, SIGHUP
            terminated = err
        elif signum is None or isinstance(err, KeyboardInterrupt):
            return _unsignalled(err, as_json)
        else:
            # a library caught the Terminated and raised its own error instead: Ray's
            # ray.wait / ray.get raise SystemExit(1), and a pybind11 module (Open3D) whose
            # import the signal interrupted raises ImportError; the finally blocks have run
            terminated = Terminated(signum)
            logger.debug("%s; what was raised then:", terminated, exc_info=True)
        if as_json:
            _json_error(str(terminated), int(terminated.code))
        return _fail(str(terminated), int(terminated.code))
    finally:
        sys.stdout = stdout


def _unsignalled(err: BaseException, as_json: bool = False) -> int:
    """The exit code and one line on stderr for an error no signal caused (re-raises a
    SystemExit); ``as_json``: the same as one JSON object on stdout too,
    ``{"error": line, "exit_code": code}``."""
    message, code = _described(err)
    if code == 1:
        logger.debug("internal error", exc_info=err)
    if as_json:
        _json_error(message, code)
    return _fail(message, code)


def _described(err: BaseException) -> tuple[str, int]:
    """``(one line, exit code)`` for an error no signal caused (re-raises a SystemExit)."""
    from pcreg.errors import InputError, NotRegisteredError, PairsFailedError

    try:
        raise err
    except InputError as err:
        return f"error: {err}", 2
    except NotRegisteredError as err:
        return str(err), 3
    except PairsFailedError as err:
        return str(err), 4
    except KeyboardInterrupt:
        return "interrupted", 130
    except OSError as err:  # a user's file or stream: permissions, name too long, disk full
        if err.filename is not None or err.errno is not None:
            source = err.filename if err.filename is not None else _broken_stdout()
            where = f"{source}: " if source is not None else ""
            return f"error: {where}{err.strerror or err}", 2
        return f"internal error: {type(err).__name__}: {err}", 1
    except Exception as err:
        return f"internal error: {type(err).__name__}: {err}", 1


def _json_error(message: str, code: int) -> None:
    """``{"error": message, "exit_code": code}`` on stdout, one line; a stdout that cannot
    take it (closed, full) is left to the stderr line."""
    import json

    line = " ".join(_ANSI.sub("", message).split()).removeprefix("error: ")
    try:
        sys.stdout.write(json.dumps({"error": line, "exit_code": code}) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


class _NamedStream:
    """A text stream whose OS errors (disk full, broken pipe) carry its name as filename."""

    def __init__(self, stream, name: str) -> None:
        self._stream, self._name = stream, name
        self.written = False  # whether the command wrote anything to it

    def write(self, text: str) -> int:
        self.written = self.written or bool(text)
        try:
            return self._stream.write(text)
        except OSError as err:
            raise OSError(err.errno, err.strerror, self._name) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as err:
            raise OSError(err.errno, err.strerror, self._name) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _flush_stdout() -> None:
    """Flush stdout inside the error handling (a closed or full stdout is exit 2, not a
    traceback at interpreter exit)."""
    if sys.stdout is None:
        raise OSError(9, "standard output is closed", "stdout")
    try:
        sys.stdout.flush()
    except OSError as err:
        raise OSError(err.errno, err.strerror, "stdout") from None


def _broken_stdout() -> str | None:
    """``"stdout"`` when standard output cannot take what was written (full, closed pipe)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        return "stdout"
    return None


def _fail(message: str, code: int) -> int:
    from pcreg._fs import write_stderr

    _flush_quietly()
    # one line: no newlines, no terminal colour codes (Open3D's)
    write_stderr(f"pcreg: {' '.join(_ANSI.sub('', message).split())}\n")
    return code


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _flush_quietly() -> None:
    """Drop what stdout could not take, so that interpreter exit does not fail on it again."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        import contextlib
        import os

        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
