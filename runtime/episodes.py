"""The episodes a run finished, as rank 0 counts them: how many, and the returns and lengths of
the last ``train.stop.window`` (the stop target and the logged means are over those)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np


class Episodes:
    """The episodes the run finished: how many, and the returns and lengths of the last
    ``window`` (the stop target and the logged means are over those)."""

    def __init__(self, window: int) -> None:
        self.count = 0
        self.returns: deque[float] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)

    def add(self, finished: Sequence[tuple[float, int]]) -> None:
        for ret, length in finished:
            self.returns.append(ret)
            self.lengths.append(length)
        self.count += len(finished)

    @property
    def mean_return(self) -> float | None:
        return float(np.mean(self.returns)) if self.returns else None

    def reached(self, target: float | None) -> bool:
        return target is not None and bool(self.returns) and float(np.mean(self.returns)) >= target

    def record(self) -> dict[str, Any]:
        """A metrics row's fields."""
        length = float(np.mean(self.lengths)) if self.lengths else None
        return {"episodes": self.count, "mean_return": self.mean_return, "mean_length": length}

    def state(self) -> dict[str, Any]:
        return {"episodes": self.count, "returns": list(self.returns), "lengths": list(self.lengths)}

    def restore(self, state: dict[str, Any]) -> None:
        self.returns.extend(state.get("returns", []))
        self.lengths.extend(state.get("lengths", []))
        self.count = int(state.get("episodes", 0))
