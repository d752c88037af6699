"""Progress bar (done / failed / skipped / running, ETA) and the end-of-sweep summary."""

import sys
from typing import Any

from tqdm import tqdm


class Progress:
    """A tqdm bar over the runs to execute; skipped runs are counted, not timed."""

    def __init__(self, total: int, stats: Any, enabled: bool = True) -> None:
        self.stats = stats
        self.running = 0
        self.bar = tqdm(total=total, desc="sweep", unit="run", disable=not enabled, file=sys.stderr,
                        dynamic_ncols=True, smoothing=0.1)
        self._refresh()

    def _refresh(self) -> None:
        s = self.stats
        self.bar.set_postfix_str(f"done={s.done} failed={s.failed} skipped={s.skipped} running={self.running}",
                                 refresh=True)

    def update(self, running: int) -> None:
        if running != self.running:
            self.running = running
            self._refresh()

    def advance(self) -> None:
        self.bar.update(1)
        self._refresh()

    def close(self) -> None:
        self.bar.close()


def print_summary(stats: Any) -> None:
    """A batch's summary on stdout (its :class:`~.batch.SweepStats`): counts, then one line per failed run."""
    head = "sweep interrupted" if stats.interrupted else "sweep stopped" if stats.stopped else "sweep finished"
    line = (f"{head} in {stats.seconds:.1f} s: {stats.total} runs — {stats.done} done, {stats.failed} failed, "
            f"{stats.skipped} skipped")
    if stats.not_run:
        line += f", {stats.not_run} not run"
    print(line)
    for run, report in stats.failures:
        print(f"  FAILED #{run.index} ({run.label}): {report.error}")
    if stats.interrupted:
        print("  rerun the same command to resume: finished runs are skipped")
    sys.stdout.flush()
