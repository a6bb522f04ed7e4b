"""What the user watches during a run: matrix ETA, the current level, one line per finished cell.

Progress goes to stderr (stdout stays for the final table and the run directory path, which scripts
read). Without a terminal, only the per-cell lines are printed.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# Without a terminal (a pipe, a log, CI) rich assumes 80 columns and would cut library paths.
PIPE_WIDTH = 200


def stdout_console() -> Console:
    """Where tables go: stdout at the terminal's width, or PIPE_WIDTH columns without one."""
    return Console() if sys.stdout.isatty() else Console(width=PIPE_WIDTH)


def stderr_console() -> Console:
    """Where progress and notes go: stderr at the terminal's width, or PIPE_WIDTH columns into a
    log (at rich's 80 a note's run directory path broke over three lines)."""
    return Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=PIPE_WIDTH)


class Display:
    def __init__(self, enabled: bool = True, console: Console | None = None):
        self.console = console or stderr_console()
        self.enabled = enabled and self.console.is_terminal
        self.quiet = not enabled
        self._progress: Progress | None = None
        self._matrix = None
        self._level = None
        self._cells_done = 0
        self._cell_t0 = 0.0
        self._cell_expected = 1.0
        self._level_expected = 1.0

    def start_matrix(self, n_cells: int, expected_s: float) -> None:
        if not self.enabled:
            return
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._matrix = self._progress.add_task(f"matrix ({n_cells} cells)", total=max(n_cells, 1))
        self._level = self._progress.add_task("", total=1, visible=False)

    def add_cells(self, n: int) -> None:
        """A budget added a round: the matrix grows."""
        if self._progress is not None:
            total = self._progress.tasks[self._matrix].total + n
            self._progress.update(
                self._matrix, total=total, description=f"matrix ({total:.0f} cells)"
            )

    def note(self, text: str) -> None:
        if not self.quiet:
            # escaped: a server's text ("[mongod]", a path with brackets) is not rich markup
            self.console.print(f"[dim]{escape(text)}[/dim]")

    def start_cell(self, plan, expected_s: float) -> None:
        self._cell_t0 = time.monotonic()
        self._cell_expected = max(expected_s, 1.0)
        if not self.quiet:
            self.console.print(
                f"cell {plan.index + 1}: "
                + (f"{escape(plan.server)} " if getattr(plan, "server", "") else "")
                + f"{plan.allocator} (thp={plan.thp}, round {plan.round}) ..."
            )

    def phase(self, label: str, seconds: float) -> None:
        self._level_expected = max(float(seconds or 1), 1.0)
        if self._progress is not None:
            self._progress.update(
                self._level,
                description=f"  {label}",
                total=self._level_expected,
                completed=0,
                visible=True,
            )
            self._tick()

    def interval(self, t: float, tps: float, qps: float) -> None:
        if self._progress is not None:
            self._progress.update(
                self._level,
                completed=min(t, self._level_expected),
                description=self._progress.tasks[self._level].description.split(" |")[0]
                + f" | {qps:,.0f} qps",
            )
            self._tick()

    def _tick(self) -> None:
        frac = min((time.monotonic() - self._cell_t0) / self._cell_expected, 0.95)
        self._progress.update(self._matrix, completed=self._cells_done + frac)

    def end_cell(self, plan, outcome) -> None:
        self._cells_done += 1
        if self._progress is not None:
            self._progress.update(self._matrix, completed=self._cells_done)
        if self.quiet:
            return
        rec = outcome.record
        took = time.monotonic() - self._cell_t0
        if rec["status"] == "ok":
            failed = [r for r in outcome.rows if r.get("status") != "ok"]
            extra = f", {len(failed)} level(s) failed" if failed else ""
            self.console.print(f"  [green]ok[/green] {plan.id} in {took:.0f}s{extra}")
        else:
            self.console.print(f"  [red]{rec['status']}[/red] {plan.id}: {rec.get('error')}")

    def start_soak(self, total_s: float, done_s: float) -> None:
        """A soak's own line: soaked / total with its ETA, and each arm's growth per hour so far
        (soak_progress)."""
        self._soak_total = max(total_s, 1.0)
        if self._progress is None:
            return
        if getattr(self, "_soak", None) is not None:  # the next stage of the same soak: one line
            self._progress.update(self._soak, total=self._soak_total, completed=done_s)
        else:
            self._soak = self._progress.add_task("soak", total=self._soak_total, completed=done_s)

    def soak_progress(self, done_s: float, growth: str) -> None:
        """After each turn of blocks: on a terminal the live line; without one (a log), one line
        per turn, so that a soak of hours shows its growth in its log too."""
        total = getattr(self, "_soak_total", 1.0)
        text = (
            f"soak {done_s / 3600:.2f}/{total / 3600:.2f} h: {growth or 'growth: too few cycles'}"
        )
        if self._progress is not None and getattr(self, "_soak", None) is not None:
            self._progress.update(
                self._soak, completed=min(done_s, total), description=escape(text)
            )
        elif not self.quiet:
            self.console.print(escape(text))

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
