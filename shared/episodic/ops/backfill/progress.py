"""The progress bar ``episodic import`` draws on a terminal while it writes
(:class:`ProgressBar`: done/total, percent, rate and ETA).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO


def _clock_text(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressBar:
    """A plain-text progress bar on a terminal (``stream``, default stderr): done/total,
    percent, rate in messages/s and ETA, redrawn at most every ``interval`` seconds. When
    the stream is not a terminal it draws nothing (the caller prints a final line).
    Thread-safe."""

    def __init__(
        self,
        total: int,
        *,
        stream: IO[str] | None = None,
        enabled: bool | None = None,
        width: int = 30,
        interval: float = 0.1,
        unit: str = "msgs",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self.interval = interval
        self.unit = unit
        self.clock = clock
        self.done = 0
        self.started = clock()
        self._drawn_at: float | None = None
        self._longest = 0
        self._lock = threading.Lock()

    def render(self) -> str:
        """The bar as one line (without the carriage return)."""
        elapsed = self.clock() - self.started
        fraction = min(1.0, self.done / self.total) if self.total else 1.0
        filled = int(fraction * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.done >= self.total:
            eta = "done"
        elif rate > 0:
            eta = f"ETA {_clock_text((self.total - self.done) / rate)}"
        else:
            eta = "ETA -:--"
        return (
            f"[{bar}] {self.done:,}/{self.total:,} {self.unit} {fraction:4.0%} "
            f"{rate:,.0f} msg/s {eta}"
        )

    def update(self, n: int) -> None:
        """Counts ``n`` more done and redraws when due."""
        with self._lock:
            self.done += n
            if not self.enabled:
                return
            now = self.clock()
            if (
                self._drawn_at is not None
                and now - self._drawn_at < self.interval
                and self.done < self.total
            ):
                return
            self._drawn_at = now
            self._draw()

    def close(self) -> None:
        """Draws the last state and ends the line (terminal only)."""
        with self._lock:
            if self.enabled:
                self._draw("\n")

    def _draw(self, end: str = "") -> None:
        # Padded to the longest line drawn so far: a shorter line must not leave the tail
        # of a longer one on the terminal.
        line = self.render()
        self._longest = max(self._longest, len(line))
        self.stream.write("\r" + line.ljust(self._longest) + end)
        self.stream.flush()
