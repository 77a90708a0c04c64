"""The repository is self-contained: no tracked text file cites a document that is not in it.

A user has only the repository. Two kinds of reference are checked in every git-tracked text file
(``.py .md .yaml .yml .xml .urdf .c .h .toml .txt .ipynb .cfg .sh`` and extension-less files such as
``assets/NOTICE``):

(a) names of documents that exist only outside the repository (internal notes a session had on its own
    machine; :data:`FORBIDDEN`): any occurrence is an error, whatever the context;
(b) references to repository files that do not exist:

    * markdown links ``[text](target)`` in ``.md`` / ``.ipynb`` files, resolved against the linking
      file's folder (URLs, ``mailto:`` and pure ``#anchor`` links are not files);
    * repository paths written out in text, ``docs/theory/khatib.md``, ``tests/paper/test_hqp.py``,
      ``scenarios/fr3_docking.yaml`` …: a path that starts with a top-level folder of the repository
      (:data:`TOP_LEVEL`) and ends with a file extension, resolved against the repository root. Globs
      (``scenarios/*.yaml``, ``{a,b}``) are patterns, not files, and are skipped; so is anything under
      ``runs/`` (generated run folders) and a placeholder name in an example (a one-letter or all-caps
      stem, or one starting with ``my_`` / ``your_`` / ``example``: ``scenarios/x.yaml``, ``docs/OUT.md``);
      a path in another repository is written ``owner/repo:path`` and is not checked;
    * a section named after such a path, ``docs/theory/khatib.md §3``, must exist: the page needs a
      heading ``## 3. …`` (or ``### 3.1 …`` for ``§3.1``); so must a function named after a Python path,
      ``tests/paper/test_khatib.py::test_friction_integral_freezes_on_contact``.

CHANGELOG.md is history (it names files and tests as they were when an entry was written): only (a)
applies there. Every finding names ``file:line`` and the bad reference. ``test_checker_finds_what_it_must``
runs the checker on a temporary tree with one bad reference of each kind, so that the scan can fail.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: documents that live outside the repository (written in pieces so that this file does not cite them)
FORBIDDEN = (
    "MATH" ".md",
    "DESIGN" ".md",
    "STYLE" ".md",
    "g20_hand" "_facts",
    "arm" "_facts",
    "rm75" "_facts",
    "ros2" "_dds.md",
    "../" "shared",
    "shared/" "facts",
    "/" "work/",
    "facts" " §",  # a section of a fact sheet, cited without its file name
)
_FORBIDDEN_RE = re.compile("|".join(re.escape(f) for f in FORBIDDEN), re.IGNORECASE)

#: scanned file types; extension-less tracked files (NOTICE, scripts) are scanned when they are text
TEXT_SUFFIXES = {
    ".py", ".md", ".yaml", ".yml", ".xml", ".urdf", ".c", ".h", ".toml", ".txt", ".ipynb", ".cfg", ".sh",
}
#: history: files that name what existed when they were written (removed files, renamed tests); only
#: the forbidden names (a) are checked there
HISTORY_FILES = {"CHANGELOG.md"}
#: top-level folders of the repository whose paths are checked when written out in text
TOP_LEVEL = (
    "assets", "bridges", "controllers", "docs", "experiments", "hand", "planners", "scenarios", "sim",
    "telemetry", "tests",
)
#: file extensions a written-out repository path ends with
PATH_SUFFIXES = ("md", "py", "yaml", "yml", "xml", "urdf", "c", "h", "json", "ipynb", "toml", "txt")

# a repository path: starts at a top-level folder (not inside a longer path, a dotted name or another
# repository's ``owner/repo:path``), ends in a known extension; a glob character, a further name character
# or a second extension (``.urdf.xacro``) after it disqualifies it
def path_pattern(top_level: Iterable[str] = TOP_LEVEL) -> re.Pattern[str]:
    """The written-out repository path (module docstring) for the given top-level folder names."""
    return re.compile(
        r"(?<![\w/.:\-])((?:" + "|".join(top_level) + r")/[\w./+\-]*?\.(?:" + "|".join(PATH_SUFFIXES) + r"))"
        r"(?![\w*{\-/])(?!\.\w)"
    )


_PATH_RE = path_pattern()
# an optional section right after the path: ``path §3``, ``path, §3.1``
_SECTION_RE = re.compile(r"\s*,?\s*§\s*(\d+(?:\.\d+)*)")
# an optional test (or other function) right after a Python path:
# ``tests/test_ik.py::test_ik_reaches_pose_and_respects_limits``
_FUNC_RE = re.compile(r"::(\w+)")
# a markdown link target
_LINK_RE = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def tracked_files(root: Path) -> list[Path]:
    """The git-tracked files under ``root`` (every file but ``.git``, ``build`` and caches when ``root``
    is not a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, text=True
        ).stdout
        files = [root / p for p in out.split("\0") if p]
        if files:
            return [f for f in files if f.is_file()]
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = {".git", "build", "__pycache__", ".pytest_cache", "runs"}
    return [p for p in root.rglob("*") if p.is_file() and not skip.intersection(p.relative_to(root).parts)]


def is_text_file(path: Path) -> bool:
    """True for the scanned types (module docstring)."""
    if path.suffix in TEXT_SUFFIXES:
        return True
    if path.suffix:
        return False
    try:
        path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return False
    return True


def _headings(path: Path, cache: dict[Path, list[str]]) -> list[str]:
    if path not in cache:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        cache[path] = [ln.lstrip("#").strip() for ln in text.splitlines() if ln.startswith("#")]
    return cache[path]


def _defines(path: Path, name: str, cache: dict[Path, list[str]]) -> bool:
    """``def name`` or ``class name`` in a Python file."""
    key = path.with_name(path.name + "::defs")
    if key not in cache:
        text = path.read_text(encoding="utf-8")
        cache[key] = re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", text, re.MULTILINE)
    return name in cache[key]


def _has_section(page: Path, section: str, cache: dict[Path, list[str]]) -> bool:
    """A heading that starts with the section number: ``3. Title``, ``3 Title``, ``§3 Title``, ``3.1 Title``."""
    pat = re.compile(r"§?\s*" + re.escape(section) + r"(?:\.|\s|$)")
    return any(pat.match(h) for h in _headings(page, cache))


def is_placeholder(ref: str) -> bool:
    """An example file name, not a reference (module docstring)."""
    stem = Path(ref).stem
    return len(stem) == 1 or stem.isupper() or stem.startswith(("my_", "your_", "example"))


def _link_target_ok(source: Path, target: str, root: Path) -> bool:
    if re.match(r"^[a-zA-Z][\w+.\-]*:", target) or target.startswith(("#", "//")):
        return True  # a URL (http:, mailto:, …) or an anchor on the same page
    path = target.split("#", 1)[0].split("?", 1)[0]
    if not path:
        return True
    resolved = (root / path.lstrip("/")) if path.startswith("/") else (source.parent / path)
    return resolved.exists()


def check_text(
    rel: str, text: str, root: Path, cache: dict[Path, list[str]] | None = None, path_re: re.Pattern[str] = _PATH_RE
) -> list[str]:
    """Findings for one file's text (``rel``: its path relative to ``root``), as ``file:line: message``."""
    cache = {} if cache is None else cache
    source = root / rel
    markdown = rel.endswith((".md", ".ipynb"))
    history = rel in HISTORY_FILES
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        for m in _FORBIDDEN_RE.finditer(line):
            out.append(f"{rel}:{n}: cites {m.group(0)!r}, a document that is not in the repository")
        if history:
            continue
        for m in path_re.finditer(line):
            ref = m.group(1).rstrip(".")
            if ref.startswith("runs/") or is_placeholder(ref):
                continue
            target = root / ref
            if not target.exists():
                out.append(f"{rel}:{n}: {ref!r} does not exist in the repository")
                continue
            sec = _SECTION_RE.match(line, m.end())
            if sec and target.suffix == ".md" and not _has_section(target, sec.group(1), cache):
                out.append(f"{rel}:{n}: {ref} has no section §{sec.group(1)} (no heading starting with it)")
            func = _FUNC_RE.match(line, m.end())
            if func and target.suffix == ".py" and not _defines(target, func.group(1), cache):
                out.append(f"{rel}:{n}: {ref} has no function {func.group(1)!r}")
        if markdown:
            for m in _LINK_RE.finditer(line):
                if not _link_target_ok(source, m.group(1), root):
                    out.append(f"{rel}:{n}: link target {m.group(1)!r} does not exist")
    return out


def check_tree(root: Path, files: Iterable[Path] | None = None, top_level: Iterable[str] = TOP_LEVEL) -> list[str]:
    """Findings over ``files`` (default: the tracked text files under ``root``), for repository paths that
    start with one of ``top_level``."""
    path_re = path_pattern(top_level)
    cache: dict[Path, list[str]] = {}
    out = []
    for path in files if files is not None else tracked_files(root):
        if not is_text_file(path):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        out += check_text(path.relative_to(root).as_posix(), text, root, cache, path_re)
    return out


def test_no_tracked_file_cites_a_missing_document() -> None:
    findings = check_tree(REPO)
    assert not findings, f"{len(findings)} reference(s) to files that are not in the repository:\n" + "\n".join(
        findings
    )


def test_checker_finds_what_it_must(tmp_path: Path) -> None:
    """On a small tree: every kind of bad reference is reported with file:line; good ones are not. The tree's
    top-level folders are ``guide`` and ``lib`` (names the repository does not have, so that this file's own
    example paths are not references to the repository)."""
    top = ("guide", "lib")
    (tmp_path / "guide" / "theory").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "guide" / "theory" / "page.md").write_text("# Page\n\n## 1. First\n\n## 2. Second\n")
    (tmp_path / "lib" / "mod.py").write_text(
        '"""Law (' + FORBIDDEN[0] + ' §2) and guide/theory/page.md §2."""\n'
        "# see guide/theory/missing.md and guide/theory/page.md §7\n"
        "# fine: guide/theory/page.md, lib/*.yaml, runs/x/telemetry.npz, https://example.org/a.md\n"
        "# fine too: lib/x.yaml, lib/my_robot.yaml (placeholders), see guide/theory/page.md.\n"
        "# and other repositories: owner/repo:guide/theory/none.md, lib/none.urdf.xacro\n"
        "# a sentence ends at lib/test_gone.py.\n"
        "# lib/mod.py::law exists, lib/mod.py::test_renamed does not\n"
        "def law():\n    pass\n"
    )
    (tmp_path / "guide" / "index.md").write_text(
        "[ok](theory/page.md#first) [bad](theory/nope.md) [web](https://example.org) [anchor](#top)\n"
        "Notes in " + FORBIDDEN[3] + ".md and " + FORBIDDEN[7] + "/x.\n"
    )
    (tmp_path / "NOTICE").write_text("numbers via " + FORBIDDEN[4] + ".yaml, see " + FORBIDDEN[-1] + "6\n")
    (tmp_path / "CHANGELOG.md").write_text("- removed lib/old.py; notes in " + FORBIDDEN[1] + "\n")  # history
    files = [tmp_path / p for p in ("lib/mod.py", "guide/index.md", "guide/theory/page.md", "NOTICE", "CHANGELOG.md")]
    findings = check_tree(tmp_path, files, top)
    expected = [
        "lib/mod.py:1: cites",
        "lib/mod.py:2: 'guide/theory/missing.md' does not exist",
        "lib/mod.py:2: guide/theory/page.md has no section §7",
        "lib/mod.py:6: 'lib/test_gone.py' does not exist",
        "lib/mod.py:7: lib/mod.py has no function 'test_renamed'",
        "guide/index.md:1: link target 'theory/nope.md' does not exist",
        "guide/index.md:2: cites",
        "NOTICE:1: cites",
        "CHANGELOG.md:1: cites",
    ]
    for e in expected:
        assert any(f.startswith(e) for f in findings), f"not reported: {e!r}; got {findings}"
    # guide/index.md:2 and NOTICE:1 carry two forbidden names each
    assert len(findings) == len(expected) + 2, findings
    assert check_tree(tmp_path, [tmp_path / "guide/theory/page.md"], top) == []
