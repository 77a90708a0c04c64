"""The shipped scenarios: list them, show one (as written or resolved), write the scenario reference.

    dockbench scenarios list                        # name, robot, planner, controller, gates, description
    dockbench scenarios show iiwa14_docking         # the YAML file as written
    dockbench scenarios show iiwa14_docking --resolved --set controller.k=800   # every key, defaults filled in
    dockbench scenarios docs > docs/scenarios.md    # the reference of every key (docs/scenarios.md)

``show`` takes a file or a shipped name, like ``dockbench run --scenario``; ``--resolved`` validates it
exactly as a run does (a bad key exits 1 with the file and key named).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from dockbench.cli import ArgumentParser


def _row(name: str, path: Path) -> tuple[str, ...]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        return (name, "?", "?", "?", "?", f"(unreadable: {exc})")
    if not isinstance(data, dict):
        return (name, "?", "?", "?", "?", "(not a mapping)")

    def kind(block: str) -> str:
        b = data.get(block)
        if not isinstance(b, dict):
            return "–"
        return str(b.get("type") or (Path(str(b["model"])).name if "model" in b else "–"))

    gates = data.get("gates") or []
    return (name, kind("robot"), kind("planner"), kind("controller"), str(len(gates)) if gates else "–",
            str(data.get("description", "")))


def list_scenarios(pattern: str | None = None) -> str:
    """The table of shipped scenarios (their files' own keys, not validated) and the shipped campaign files."""
    from dockbench.sim.scenario import SHIPPED_SCENARIOS, shipped_scenarios

    names = [n for n in shipped_scenarios() if pattern is None or pattern in n]
    rows = [("name", "robot", "planner", "controller", "gates", "description")]
    rows += [_row(n, SHIPPED_SCENARIOS / f"{n}.yaml") for n in names]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5] for r in rows]
    lines.append(f"{len(names)} scenarios in {SHIPPED_SCENARIOS}: dockbench run --scenario NAME")
    campaigns = sorted((SHIPPED_SCENARIOS / "campaigns").glob("*.yaml")) if pattern is None else []
    if campaigns:
        lines.append("campaigns (dockbench campaign run FILE): "
                     + ", ".join(str(p.relative_to(SHIPPED_SCENARIOS.parent)) for p in campaigns))
    return "\n".join(lines)


def show(name: str, resolved: bool, sets: list[str]) -> str:
    from dockbench.sim.scenario import load_scenario, resolve_scenario

    path = resolve_scenario(name)
    if not resolved and not sets:
        return f"# {path}\n" + path.read_text()
    scenario = load_scenario(path, sets or None)
    return f"# {path}, resolved" + (f" with --set {' --set '.join(sets)}" if sets else "") + "\n" + yaml.safe_dump(
        scenario.to_dict(), sort_keys=False, allow_unicode=True, width=120)


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{list,show,docs}")
    p = sub.add_parser("list", help="the shipped scenarios, one line each")
    p.add_argument("pattern", nargs="?", default=None, help="only names containing this text (e.g. orbit/)")
    p = sub.add_parser("show", help="a scenario's YAML (a file or a shipped name)")
    p.add_argument("scenario", help="scenario YAML file, or the name of a shipped one")
    p.add_argument("--resolved", action="store_true", help="validated, with every default filled in")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                   help="override a key first, as `dockbench run --set` (implies --resolved; repeatable)")
    p = sub.add_parser("docs", help="the scenario reference (markdown; docs/scenarios.md is this output)")
    p.add_argument("--out", default=None, help="write it to this file instead of standard output")
    args = ap.parse_args(argv)

    from dockbench.sim.errors import DockbenchError

    try:
        if args.cmd == "list":
            print(list_scenarios(args.pattern))
        elif args.cmd == "show":
            sys.stdout.write(show(args.scenario, args.resolved, args.sets))
        else:
            from dockbench.sim.scenario import docs_markdown

            text = docs_markdown()
            if args.out:
                from dockbench.telemetry.log import atomic_write_text

                atomic_write_text(Path(args.out), text)
                print(f"wrote {args.out}")
            else:
                sys.stdout.write(text)
    except DockbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
