"""The ``dockbench`` command: every user tool behind one program, with shell-friendly exit codes.

    dockbench run --scenario iiwa14_docking --duration 2
    dockbench campaign run scenarios/campaigns/iiwa14_monte_carlo.yaml --jobs 2
    dockbench plot RUN_DIR
    dockbench doctor

Each subcommand is a thin entry to an ``experiments`` module's ``main(argv)`` (the module owns its options;
``dockbench SUBCOMMAND --help`` prints them): ``python experiments/run_docking.py --scenario …`` and
``dockbench run --scenario …`` are the same code. ``dockbench-run`` and ``dockbench-campaign`` stay as
aliases of ``dockbench run`` and ``dockbench campaign run``.

Exit codes (every subcommand, and every ``experiments/*.py`` script run directly):

====  =====================================================================================================
0     success; for a run: every gate passes
1     error: bad scenario or file, missing package, diverged simulation, … (a message, not a traceback)
2     a gate fails, the run is unstable, or it ended before its planner (INCOMPLETE)
64    command-line usage error (an unknown option, a missing argument, ``--set controller.k 800``);
      ``EX_USAGE`` of sysexits.h, so that a sweep script can tell a typo from a failed gate
130   interrupted by Ctrl-C (SIGINT); 143 by SIGTERM (``dockbench run`` writes what it recorded)
====  =====================================================================================================

This module is also where the scripts get their :class:`ArgumentParser` (argparse's, with usage errors
exiting 64 instead of 2). It imports nothing heavy: ``dockbench --help`` does not load MuJoCo.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_FAIL = 2  # a gate fails, unstable, INCOMPLETE
EXIT_USAGE = 64  # sysexits.h EX_USAGE
EXIT_SIGINT = 130

EXIT_CODES = (
    (EXIT_OK, "success (a run: every gate passes)"),
    (EXIT_ERROR, "error (bad scenario or file, missing package, diverged simulation); a message, no traceback"),
    (EXIT_FAIL, "a gate fails, the run is unstable, or it ended before its planner (INCOMPLETE)"),
    (EXIT_USAGE, "command-line usage error (unknown option, missing argument, `--set controller.k 800`)"),
    (EXIT_SIGINT, "interrupted by Ctrl-C (143: SIGTERM)"),
)

#: the ``prog`` of the parsers a subcommand builds (``dockbench run``), set while :func:`main` delegates
_prog: str | None = None
#: :func:`main` runs as the program (on ``sys.argv``), not called from Python with an argv
_program = False


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with usage errors exiting :data:`EXIT_USAGE` (64) instead of 2, which dockbench
    reserves for a failed gate. Every command-line tool of the package builds its parser from this class
    (subparsers inherit it). Under ``dockbench SUBCOMMAND`` a parser without an explicit ``prog`` is named
    after the subcommand."""

    def __init__(self, *args, **kwargs) -> None:
        if _prog is not None and not args and kwargs.get("prog") is None:
            kwargs["prog"] = _prog
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 - argparse's
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # noqa: D401 - argparse's signature
        self.print_usage(sys.stderr)
        argv = getattr(self, "_argv", [])
        unpaired = [v for k, v in zip(argv, argv[1:], strict=False) if k == "--set" and "=" not in v]
        if message.startswith("unrecognized arguments") and unpaired:  # `--set controller.k 800`
            message += f" (--set takes KEY=VALUE in one word: --set {unpaired[0]}=VALUE)"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) for a child Python process that must run this same dockbench, e.g. a
    tool that starts ``experiments/run_docking.py`` by its path: imported from a checkout (the package beside
    a pyproject.toml), the checkout goes first on ``PYTHONPATH``, which is what an editable install of it does
    and keeps the child on this code when another copy is installed; an installed wheel needs nothing."""
    import os

    import dockbench

    out = dict(os.environ if env is None else env)
    root = Path(dockbench.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file():
        out["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), out.get("PYTHONPATH", "")) if p)
    return out


@dataclass(frozen=True)
class Command:
    """A subcommand: ``target`` is ``module:function`` (the function takes argv and returns an exit code),
    or ``commands`` holds a group's own subcommands (``dockbench campaign run``); a group with a ``target``
    runs it when the next word is not one of its subcommands (``dockbench mirror`` vs ``dockbench mirror
    mock``)."""

    summary: str
    target: str | None = None
    commands: dict[str, Command] = field(default_factory=dict)


_X = "dockbench.experiments."

COMMANDS: dict[str, Command] = {
    "run": Command("run one scenario, score its gates, write its run folder", "dockbench.cli:_run"),
    "campaign": Command("parameter sweeps and Monte Carlo studies (run, report)", commands={
        "run": Command("run a campaign file: every trial, results.csv, summary.json, figures; resumable",
                       _X + "campaign:main"),
        "report": Command("a campaign folder's results as a markdown section (e.g. of docs/results.md)",
                          _X + "campaign_results:main"),
    }),
    "plot": Command("figures of a run folder, or several runs overlaid", _X + "plot_telemetry:main"),
    "export": Command("a run folder as MCAP (Foxglove, PlotJuggler) or Rerun (.rrd)", _X + "export:main"),
    "tune": Command("robust gain tuning over a campaign with Optuna (--compare: tuned vs shipped laws)",
                    _X + "tune:main"),
    "compare": Command("runs or scenarios side by side: the comparison table (Markdown, CSV)", _X + "compare:main"),
    "scenarios": Command("the shipped scenarios (list, show, docs)", _X + "scenario_tools:main"),
    "bench": Command("real-time factors, cost split per step, the physics floor", _X + "bench:main"),
    "hand": Command("the G20 hand bridge: drive, self-test, replay and record", _X + "g20_bridge:main"),
    "mirror": Command("kinematic mirror of live joint states (dual RM75) in MuJoCo", _X + "mirror:main", commands={
        "mock": Command("mock joint-state source for the mirror (both RM75 arms, 90 Hz)",
                        _X + "mock_joint_states:main"),
    }),
    "doctor": Command("what is installed: kernels, extras, OpenGL backend, ROS 2 transport", _X + "doctor:main"),
}


def _run(argv: list[str]) -> int:
    """``dockbench run``: as the program, signals are handled until the process exits (run_docking.cli);
    called from Python, the caller's signal handlers are restored afterwards (run_docking.main)."""
    from dockbench.experiments.run_docking import cli, main

    return cli(argv) if _program else main(argv)


def _lines(commands: dict[str, Command], prefix: str = "") -> list[tuple[str, str]]:
    rows = []
    for name, cmd in commands.items():
        if cmd.target is not None or not cmd.commands:
            rows.append((prefix + name, cmd.summary))
        if cmd.commands:
            rows.extend(_lines(cmd.commands, prefix + name + " "))
    return rows


def help_text(path: Sequence[str] = (), commands: dict[str, Command] = COMMANDS) -> str:
    """The listing of ``dockbench [GROUP] --help``: the subcommands with one line each, and the exit codes."""
    prog = " ".join(("dockbench", *path))
    rows = _lines(commands)
    width = max(len(n) for n, _ in rows)
    text = [f"usage: {prog} COMMAND [ARGS...]", ""]
    if not path:
        text += ["Compliant robotic docking experiments: every tool behind one command.", ""]
    text += ["commands:"]
    text += [f"  {n:<{width}}  {s}" for n, s in rows]
    text += ["", f"`{prog} COMMAND --help` shows a command's options."]
    if not path:
        text += ["", "exit codes:"] + [f"  {c:<4} {s}" for c, s in EXIT_CODES]
        text += ["", "Research and QA scripts: python experiments/NAME.py --help (index: experiments/README.md)."]
    return "\n".join(text) + "\n"


def _usage_error(message: str, path: Sequence[str]) -> int:
    prog = " ".join(("dockbench", *path))
    sys.stderr.write(f"usage: {prog} COMMAND [ARGS...]  (`{prog} --help` lists the commands)\n"
                     f"{prog}: error: {message}\n")
    return EXIT_USAGE


def _call(target: str, argv: list[str], prog: str) -> int:
    """Import ``module:function`` and call it on ``argv``: its return value (or SystemExit code) is the exit
    code; a DockbenchError it lets through is printed as one line (exit 1), Ctrl-C exits 130."""
    global _prog
    module, _, name = target.partition(":")
    previous, _prog = _prog, prog
    try:
        func: Callable[[list[str]], int | None] = getattr(importlib.import_module(module), name)
        code = func(argv)
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_SIGINT
    except Exception as exc:
        from dockbench.sim.errors import DockbenchError

        if not isinstance(exc, DockbenchError):
            raise
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_ERROR
    finally:
        _prog = previous
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")  # SystemExit("message"), as Python prints it
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """The ``dockbench`` program (console script): dispatch to the subcommand; returns the exit code.
    ``argv`` None = the program's command line (``sys.argv``)."""
    global _program
    _program = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    commands, path = COMMANDS, []
    group: Command | None = None
    while True:
        if not args:
            if group is not None and group.target is not None:
                break  # e.g. `dockbench mirror` with no options
            sys.stderr.write(help_text(path, commands))
            return EXIT_USAGE
        word = args[0]
        if word in ("-h", "--help") and (group is None or group.target is None):
            sys.stdout.write(help_text(path, commands))
            return EXIT_OK
        if word == "--version" and group is None:
            from dockbench import __version__

            print(f"dockbench {__version__}")
            return EXIT_OK
        if word == "help" and group is None:  # `dockbench help run` = `dockbench run --help`
            return main([*args[1:], "--help"]) if args[1:] else main(["--help"])
        cmd = commands.get(word)
        if cmd is None:
            if group is not None and group.target is not None:
                break  # the group's own tool takes these arguments (`dockbench mirror --offscreen`)
            close = difflib.get_close_matches(word, list(commands), n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(close)}?" if close else f"; commands: {', '.join(commands)}"
            if word.endswith((".yaml", ".yml")) and "run" in commands:  # `dockbench campaign FILE.yaml`
                hint = f"; did you mean {' '.join(('dockbench', *path))} run {word}?"
            return _usage_error(f"unknown command {word!r}{hint}", path)
        path.append(word)
        args = args[1:]
        group = cmd
        if not cmd.commands:
            break
        commands = cmd.commands
    assert group is not None and group.target is not None
    return _call(group.target, args, " ".join(("dockbench", *path)))


if __name__ == "__main__":  # `python -m dockbench.cli`: run the imported module, whose parser class the tools use
    from dockbench.cli import main as _main

    raise SystemExit(_main())
