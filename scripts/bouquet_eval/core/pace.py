"""Durations as people read them, and the time left in a piece of work at its pace so far.

Standard library only: the console imports it while Snakemake starts.
"""

from __future__ import annotations


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class Pace:
    """The time left in a piece of work of `total` units from the pace since its first unit
    was done: what came before (planning, starting a job, loading a model) is not counted, so
    the estimate is the pace of the work itself from its second observation on."""

    def __init__(self, total: float, done: float = 0.0) -> None:
        self.total = total
        self.before = done
        """Done when the work was first seen: units made earlier are not part of its pace."""
        self.first: tuple[float, float] | None = None
        self.latest: tuple[float, float] | None = None

    def observe(self, done: float, now: float) -> None:
        """Note that `done` units are done at time `now` (seconds, any fixed origin)."""
        if self.first is None:
            if done > self.before:
                self.first = (now, done)
        elif done > self.first[1]:
            self.latest = (now, done)

    def left(self) -> float | None:
        """Seconds left at the pace since the first unit; None before a second observation
        that moved, or once every unit is done."""
        if self.first is None or self.latest is None:
            return None
        (since, first), (now, done) = self.first, self.latest
        if done >= self.total:
            return None
        return (now - since) / (done - first) * (self.total - done)
