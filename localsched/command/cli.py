"""The ``localsched`` command: profile a script, or run the bundled demo.

    localsched profile [-o report.html] [--json run.json] [--trace trace.json] SCRIPT.py [ARGS...]
    localsched profile SCRIPT.py [ARGS...] [-o report.html] [--json run.json] [--trace FILE]
    localsched profile [--dashboard[=ADDR] [--wait]] (SCRIPT.py | -m MODULE | -c CODE) [ARGS...]
    localsched demo [-o report.html]
    localsched report run.json [-o report.html] [--trace trace.json]
    localsched compare [--repeats N] before.json after.json [--threshold 0.25]

``profile`` and ``demo`` run with every diagnostic on
(``localsched.performance_report``: tasks, resources, cache in bytes, fine
metrics and stack samples when available) and a progress bar, and write the
performance report: one self-contained HTML page.  ``--json`` also saves the
run's records, ``--trace`` exports them for Perfetto UI / chrome://tracing.
``report`` renders a saved run (or the data embedded in a report page)
again; ``compare`` (``compare``) compares two group by group and exits
1 on a regression.  ``profile --dashboard`` also serves the live dashboard while the
script runs (``--wait``: until Ctrl-C after it ends).  ``python -m
localsched`` is the same command.  ``localsched <command> --help`` lists
every option.

Before any work, the output paths are checked (``outputs.check_writable``;
none may be an input -- the script, a run ``report`` reads -- or another
output) and so are the script or ``-m`` module: a problem is one line and a
non-zero status, and nothing runs.  Outputs are written whole or not at
all (``outputs.write_text``); one that fails after the run is one line,
and the status stays the script's.  What the command prints itself goes
through ``termsafe.terminal_text`` (names are shown, never obeyed).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
import traceback
from collections.abc import Sequence
from contextlib import ExitStack, contextmanager

from ..system.termsafe import terminal_text

SCHEDULERS = ("threads", "processes", "sync", "distributed")


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="report.html", metavar="FILE",
                   help="where to write the HTML report (default: %(default)s)")
    p.add_argument("--scheduler", choices=SCHEDULERS, default="threads",
                   help="scheduler for localsched.compute and dask collections "
                        "(default: %(default)s)")
    p.add_argument("--address", default=None, metavar="ADDRESS",
                   help="with --scheduler distributed: the dask.distributed scheduler "
                        "(e.g. tcp://10.0.0.5:8786; default: the current Client, else "
                        "a LocalCluster started for the run)")
    p.add_argument("--num-workers", type=_positive_int, default=None, metavar="N",
                   help="worker threads or processes (default: the number of CPUs)")
    p.add_argument("--dt", type=_positive_float, default=0.25, metavar="SECONDS",
                   help="ResourceProfiler sampling interval (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true",
                   help="do not show the progress bar")
    p.add_argument("--group-progress", action="store_true",
                   help="one progress line per task group")
    p.add_argument("--show", action="store_true",
                   help="also open the report in a browser")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="also save the run's records as JSON (for `localsched report`)")
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="also export a Trace Event Format file (Perfetto UI, "
                        "chrome://tracing)")
    p.add_argument("--no-samples", action="store_true",
                   help="do not sample the worker threads' stacks (no flame graph)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="localsched",
        description="Run task graphs with localsched and report where the time and "
                    "memory went.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"localsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    prof = sub.add_parser(
        "profile",
        help="run a Python script under localsched with all profilers on",
        description="Run SCRIPT.py (as __main__, with ARGS as its sys.argv[1:]) with "
                    "localsched as the scheduler -- also for dask collections, when "
                    "dask is installed -- and every profiler on; then write the report. "
                    "The report is written even when the script fails; the exit status "
                    "is then non-zero. Options for localsched go before SCRIPT.py; the "
                    "output options (-o, --json, --trace) may also come last, after the "
                    "script's arguments; everything else after SCRIPT.py goes to the "
                    "script (after '--', everything does). An output that would "
                    "overwrite the script (or another output) is refused before it runs.",
    )
    _common_options(prof)
    prof.add_argument("--dashboard", default=None, metavar="ADDR",
                      help="serve the live dashboard while the script runs; a bare "
                           "--dashboard binds 127.0.0.1 on a free port, --dashboard=ADDR "
                           "binds ADDR (host:port)")
    prof.add_argument("--wait", action="store_true",
                      help="with --dashboard: keep serving after the script ends, until "
                           "Ctrl-C")
    what = prof.add_mutually_exclusive_group()
    what.add_argument("-m", dest="module", default=None, metavar="MODULE",
                      help="run library module MODULE as a script (as python -m does)")
    what.add_argument("-c", dest="code", default=None, metavar="CODE",
                      help="run the program passed in as a string (as python -c does)")
    prof.add_argument("script", metavar="SCRIPT.py", nargs="?", help="the script to run")
    prof.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                      help="arguments for the script")

    demo = sub.add_parser(
        "demo",
        help="run the bundled example workload (blocked NumPy arithmetic)",
        description="Run a bundled workload -- blocked NumPy matrix products, "
                    "element-wise arithmetic and tree reductions, enough to keep all "
                    "cores busy for a few seconds -- with every profiler on, and write "
                    "the report.",
    )
    _common_options(demo)
    demo.add_argument("--blocks", type=_positive_int, default=6, metavar="B",
                      help="blocks per matrix side (default: %(default)s)")
    demo.add_argument("--block-size", type=_positive_int, default=400, metavar="N",
                      help="rows and columns per block (default: %(default)s)")

    rep = sub.add_parser(
        "report",
        help="render a saved run (from --json or save_json) as the HTML report again",
        description="Read a run saved as JSON (`localsched profile --json`, "
                    "RunData.save_json, performance_report(json=...)) -- or the data "
                    "embedded in a report page -- and write the performance report.",
    )
    rep.add_argument("data", metavar="DATA.json", nargs="+",
                     help="the saved run (or a report page); several are merged into one "
                          "report")
    rep.add_argument("-o", "--output", default="report.html", metavar="FILE",
                     help="where to write the HTML report (default: %(default)s)")
    rep.add_argument("--trace", default=None, metavar="FILE",
                     help="also export a Trace Event Format file")
    rep.add_argument("--title", default=None, help="the page's title")
    rep.add_argument("--show", action="store_true", help="also open the report in a browser")

    from .compare import add_compare_parser

    add_compare_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``localsched`` command; returns the exit status."""
    argv = _bare_dashboard(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "profile":
        _what_to_run(args, parser)
        _take_trailing_output(args, fenced="--" in argv)
    if args.command == "compare":  # (reads two files, writes none)
        from .compare import run_compare

        return run_compare(args)
    _check_not_inputs(args)
    _check_outputs(args)  # (before any work: a bad path must not cost a run)
    if args.command == "demo":
        return _run_profiled(args, _demo_workload(args))
    if args.command == "report":
        return _render_saved(args)
    return _run_profiled(args, _script_workload(args))


def _check_outputs(args) -> None:
    """Exit with one line if an output file (``-o``, ``--json``, ``--trace``)
    could not be written."""
    from ..diagnostics.runs.outputs import check_writable

    for option, path in (("-o", args.output), ("--json", getattr(args, "json", None)),
                         ("--trace", args.trace)):
        problem = None if path is None else check_writable(path)
        if problem is not None:
            raise SystemExit(f"localsched: cannot write {option} {terminal_text(path)}: "
                             f"{terminal_text(problem)}")


#: profile's options that take a value (to find where SCRIPT.py starts).
_VALUED = {"-o", "--output", "--scheduler", "--address", "--num-workers", "--dt", "--json",
           "--trace", "-m", "-c", "--dashboard"}


def _bare_dashboard(argv: list) -> list:
    """A bare ``--dashboard`` among profile's own options means the default
    address (``--dashboard=ADDR`` gives one), so ``--dashboard script.py``
    never takes the script for an address."""
    if "profile" not in argv:
        return argv
    out = list(argv)
    i = out.index("profile") + 1
    while i < len(out):
        token = out[i]
        if token == "--dashboard":
            out[i] = "--dashboard=127.0.0.1:0"
        elif token == "--" or not token.startswith("-"):
            break
        elif token in _VALUED:
            i += 1
        i += 1
    return out


def _what_to_run(args, parser) -> None:
    """Exactly one of SCRIPT.py, -m MODULE, -c CODE; with -m/-c, what argparse
    took for the script is the program's first argument."""
    if args.module is None and args.code is None:
        if args.script is None:
            parser.error("profile needs SCRIPT.py, -m MODULE or -c CODE")
        return
    if args.script is not None:
        args.args = [args.script, *args.args]
        args.script = None
    if args.wait and args.dashboard is None:
        parser.error("--wait needs --dashboard")


@contextmanager
def _as_default_scheduler(args):
    """Make the chosen scheduler the default for localsched and for dask."""
    from functools import partial

    from ..delayed import get_scheduler, process_default_scheduler

    if args.address is not None and args.scheduler != "distributed":
        raise SystemExit("localsched: --address needs --scheduler distributed")
    get = get_scheduler(args.scheduler)
    if args.scheduler == "distributed":
        if args.address is not None:
            get = partial(get, address=args.address)
    elif args.num_workers is not None and args.scheduler != "sync":
        get = partial(get, num_workers=args.num_workers)
    # For every thread of the script, not only this one.
    previous, process_default_scheduler[0] = process_default_scheduler[0], get
    try:
        with ExitStack() as stack:
            if _dask_installed():
                import dask

                stack.enter_context(dask.config.set(scheduler=get))
            yield
    finally:
        process_default_scheduler[0] = previous
        if args.scheduler == "distributed":  # (the embedded cluster or address Client)
            import sys

            sys.modules["localsched.distributed"].shutdown()


def _dask_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("dask") is not None


def _run_profiled(args, workload) -> int:
    from ..diagnostics import ProgressBar
    from ..diagnostics.report import performance_report

    status = 0
    t0 = time.monotonic()
    profiling = os.getpid()  # a script that forks: the outputs are this process's
    title = ("localsched demo" if args.command == "demo"
             else f"localsched profile {_program_name(args)}")
    report = performance_report(args.output, title=title, dt=args.dt,
                                samples=not args.no_samples, json=args.json, trace=args.trace)
    report.header.update(_header_of(args))
    writing = _OutputsWritten(report)
    dash = _start_dashboard(args)
    with ExitStack() as stack:
        stack.enter_context(_as_default_scheduler(args))
        stack.enter_context(writing)
        if dash is not None:
            stack.enter_context(dash)
        if not args.no_progress:
            stack.enter_context(ProgressBar(
                group_by="prefix" if args.group_progress else None, out=sys.stderr))
        try:
            workload()
        except SystemExit as exc:
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)  # (the script's own words, as python prints them)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            status = 130
        except BaseException:  # noqa: B036 -- the script's own failure, reported
            traceback.print_exc()
            status = 1
        report.header["status"] = status  # (a failed run: compare never passes it)
        if os.getpid() != profiling:
            stack.pop_all()  # a forked child of the script ends as the script would
    if os.getpid() != profiling:
        return status
    elapsed = time.monotonic() - t0
    if writing.error is not None:  # (checked before the run: a race, a full disk)
        print(f"localsched: cannot write the report: {terminal_text(str(writing.error))}",
              file=sys.stderr)
        status = status or 1
    else:
        _written(args, _elapsed_line(report.data, elapsed))
    if dash is not None:
        written = os.path.abspath(args.output) if writing.error is None else None
        _serve_until_interrupted(args, dash, written)
    return status


class _OutputsWritten:
    """``performance_report`` as a context whose writing failure is kept
    (``error``), not raised: the script's status and output come first."""

    def __init__(self, report):
        self.report = report
        self.error: OSError | None = None

    def __enter__(self):
        return self.report.__enter__()

    def __exit__(self, *exc) -> None:
        try:
            self.report.__exit__(*exc)
        except OSError as error:
            self.error = error


def _header_of(args) -> dict:
    """What the report's header says of the command: scheduler, script."""
    workers = f" ({args.num_workers} workers)" if args.num_workers else ""
    out: dict = {"scheduler": f"{args.scheduler}{workers}"}
    if args.command == "demo":
        out["name"] = "localsched demo"
    elif getattr(args, "module", None):
        out["name"] = f"-m {args.module}"
    elif getattr(args, "code", None) is not None:
        out["code"] = args.code
    else:
        out["script"] = args.script
    return out


def _program_name(args) -> str:
    if getattr(args, "module", None):
        return f"-m {args.module}"
    if getattr(args, "code", None) is not None:
        return "-c"
    return os.path.basename(args.script)


def _start_dashboard(args):
    """The live dashboard of ``profile --dashboard`` (None without it); its
    link goes to stderr (stdout is the script's)."""
    address = getattr(args, "dashboard", None)
    if address is None:
        return None
    from ..diagnostics.live import Dashboard

    try:
        dash = Dashboard(address, memory=True, quiet=True)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"localsched: --dashboard={terminal_text(address)}: "
                         f"{terminal_text(exc)}") from None
    print(f"localsched dashboard: {dash.link}", file=sys.stderr, flush=True)
    return dash


def _serve_until_interrupted(args, dash, report: str | None) -> None:
    """``--wait``: the page stays up until Ctrl-C; then (always) it closes,
    an open page's last update naming the report written (``report``)."""
    import threading

    try:
        if args.wait:
            print(f"localsched: dashboard still serving at {dash.link}; Ctrl-C to stop",
                  file=sys.stderr, flush=True)
            forever = threading.Event()
            while not forever.wait(3600):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        where = f"; its report: {report}" if report else ""
        dash.close(ended=f"the script ended: this page no longer updates{where}")


def _written(args, what: str) -> None:
    outputs = [os.path.abspath(args.output)]
    outputs += [os.path.abspath(p) for p in (getattr(args, "json", None), args.trace) if p]
    print(f"localsched: {terminal_text(what)}; written: {terminal_text(', '.join(outputs))}",
          file=sys.stderr)
    if args.show:
        from bokeh.util.browser import view

        view(os.path.abspath(args.output))


def _render_saved(args) -> int:
    from ..diagnostics.report import RunData

    runs = []
    for path in args.data:
        try:
            runs.append(RunData.load_json(path))
        except OSError as exc:
            raise SystemExit(f"localsched: cannot read {terminal_text(path)}: "
                             f"{terminal_text(exc.strerror or exc)}") from None
        except ValueError as exc:  # (a RunFileError: names the file and what is wrong)
            raise SystemExit(f"localsched: {terminal_text(exc)}") from None
    # Runs recorded apart in time sit side by side, not across the hours between them.
    run = runs[0] if len(runs) == 1 else RunData.side_by_side(
        runs, names=[os.path.basename(p) for p in args.data])
    if args.title:
        run.meta["title"] = args.title
    run.to_html(args.output, title=args.title)
    if args.trace:
        run.to_chrome_trace(args.trace)
    _written(args, f"{len(run.tasks)} tasks from {', '.join(args.data)}")
    return 0


def _elapsed_line(run, elapsed: float) -> str:
    """The wall time the report and the progress bar show (the computations'),
    and the whole command's when start-up made it longer."""
    from ..diagnostics.reporting.naming import format_seconds

    wall = run.summary().wall
    line = f"{len(run.tasks)} tasks in {format_seconds(wall)}"
    if elapsed > wall + 0.05:
        line += f" of computation ({elapsed:.2f}s with start-up and graph building)"
    return line


#: localsched's output options a command line may also give after SCRIPT.py.
_TRAILING = {"-o": "output", "--output": "output", "--json": "json", "--trace": "trace"}


def _take_trailing_output(args, fenced: bool) -> None:
    """``localsched profile SCRIPT.py ARGS -o FILE --json FILE``: the output
    options (``-o``/``--output``, ``--json``, ``--trace``, each also as
    ``--opt=FILE``) at the end of the command line are localsched's, unless
    it has a ``--`` (argparse drops it; then all of ARGS is the script's).
    One of them amid the script's arguments is ambiguous: one line, status
    2, nothing runs (pyinstrument and memray give the script everything
    after it; here the end of the line is localsched's too)."""
    rest = list(args.args)
    if rest[:1] == ["--"]:
        args.args = rest[1:]
    if fenced:
        return
    while rest:
        if len(rest) >= 2 and rest[-2] in _TRAILING:
            setattr(args, _TRAILING[rest[-2]], rest[-1])
            rest = rest[:-2]
            continue
        name, eq, value = rest[-1].partition("=")
        if eq and name in _TRAILING and name.startswith("--"):
            setattr(args, _TRAILING[name], value)
            rest = rest[:-1]
            continue
        break
    args.args = rest
    for token in rest:
        name = token.partition("=")[0]
        if token in _TRAILING or (name in _TRAILING and name.startswith("--")):
            print(f"localsched: {terminal_text(repr(name))} after SCRIPT.py is followed by the "
                  "script's own arguments: put localsched's options before SCRIPT.py or at "
                  "the end, or give the script its arguments after '--'", file=sys.stderr)
            raise SystemExit(2)


def _check_not_inputs(args) -> None:
    """Exit with one line, before any work, if an output would overwrite an
    input (the script, ``-m``'s module, a run ``report`` reads) or another
    output: compared as real paths (links resolved) and, for files that
    exist, as the same file (hard links)."""
    inputs = []
    if getattr(args, "script", None):
        inputs.append(("the script", args.script))
    if getattr(args, "module", None):
        origin = _module_file(args.module)
        if origin:
            inputs.append(("the module's file", origin))
    for path in getattr(args, "data", None) or ():
        inputs.append(("the run it reads", path))
    outputs = [(option, path) for option, path in (
        ("-o", args.output), ("--json", getattr(args, "json", None)),
        ("--trace", getattr(args, "trace", None))) if path is not None]
    for i, (option, path) in enumerate(outputs):
        others = inputs + [(f"the {o} output", p) for o, p in outputs[:i]]
        for what, other in others:
            if _same_file(path, other):
                raise SystemExit(f"localsched: {option} {terminal_text(path)} would overwrite "
                                 f"{what} ({terminal_text(other)}): choose another file")


def _same_file(a, b) -> bool:
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _module_file(module: str) -> str | None:
    """The file ``-m module`` runs, when finding it is harmless (a top-level
    module: no parent package imported), else None."""
    if "." in module:
        return None
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    return origin if origin and os.path.isfile(origin) else None


def _script_workload(args):
    if args.module is not None:
        return _module_workload(args)
    if args.code is not None:
        return _code_workload(args)
    script = args.script
    if not os.path.isfile(script):
        raise SystemExit(f"localsched: no such script: {terminal_text(script)}")

    def run():
        argv, path0 = sys.argv, sys.path[0]
        sys.argv = [script, *args.args]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            sys.argv = argv
            sys.path[0] = path0

    return run


def _module_workload(args):
    module = args.module
    problem = _unrunnable_module(module)
    if problem is not None:
        raise SystemExit(f"localsched: {terminal_text(problem)}")

    def run():
        argv, path0 = sys.argv, sys.path[0]
        sys.argv = [module, *args.args]
        sys.path[0] = os.getcwd()  # as python -m does
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        finally:
            sys.argv = argv
            sys.path[0] = path0

    return run


def _unrunnable_module(module: str) -> str | None:
    """Why ``python -m module`` would fail to start, or None: checked
    before the run, as a missing script is (finding a submodule imports
    its parent packages, as ``-m`` does)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            if importlib.util.find_spec(f"{module}.__main__") is None:
                return f"no such module: {module}.__main__ ({module} is a package " \
                       "and cannot be run directly)"
    except (ImportError, ValueError) as exc:  # (a parent that is missing or fails)
        return f"no such module: {module} ({type(exc).__name__}: {exc})"
    return None if spec is not None else f"no such module: {module}"


def _code_workload(args):
    code = args.code

    def run():
        argv, path0 = sys.argv, sys.path[0]
        sys.argv = ["-c", *args.args]
        sys.path[0] = ""  # as python -c does
        try:
            exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
        finally:
            sys.argv = argv
            sys.path[0] = path0

    return run


def _demo_workload(args):
    # One BLAS thread per task: the parallelism shown is the scheduler's.
    # (here, before the report imports NumPy: BLAS reads them when loaded)
    from .demo import one_blas_thread

    one_blas_thread()

    def run():
        from ..delayed import compute
        from .demo import blocked_workload

        total, checks = blocked_workload(args.blocks, args.block_size)
        result, ok = compute(total, checks)
        print(f"demo: checksum {result:.6g}; identities hold: {ok}", file=sys.stderr)
        if not ok:
            raise SystemExit("demo: blocked results disagree with the identities")

    return run


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
