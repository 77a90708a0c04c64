"""A one-line progress counter for the slow command-line tools (bench, video, figures).

Written to stderr only when stderr is a terminal (a pipe, a log file or CI gets nothing, so their output
stays the table or the list it was), rewritten in place with ``\\r`` and ended with a newline by
:meth:`Progress.close`. Also a context manager.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``label  i/total  note  (elapsed s)`` on one line of ``stream`` (stderr), if it is a terminal.

    Args:
        label: what is counted (``"bench"``, ``"video frames"``, ``"figures"``).
        total: the number of steps expected (0: unknown, only the count is shown).
        stream: where to write (default stderr); ``enabled`` overrides the terminal test.
    """

    def __init__(self, label: str, total: int = 0, stream: TextIO | None = None, enabled: bool | None = None):
        self.label, self.total, self.i = label, int(total), 0
        self.stream = sys.stderr if stream is None else stream
        self.enabled = bool(self.stream.isatty()) if enabled is None else enabled
        self._t0 = time.monotonic()
        self._shown = False

    def step(self, note: str = "", n: int = 1) -> None:
        """Count ``n`` more steps and show ``note`` (e.g. the item now starting)."""
        self.i += n
        if not self.enabled:
            return
        of = f"/{self.total}" if self.total else ""
        self.stream.write(f"\r{self.label} {self.i}{of}  {note[:60]:<60}  ({time.monotonic() - self._t0:.0f} s)")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """End the line (once)."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
