"""What moving a result between processes costs: the planner's sample.

On processes, a result without large buffers comes back through the pipe,
and a task of another batch that uses it gets it through the pipe again:
pickled in its worker, unpickled here, pickled again with the next batch,
unpickled in the next worker.  For an array under the shared-memory
threshold that is 15-35 µs a hop; for a small pandas frame 0.3 ms (a fixed
cost per object, whatever its size), for a list of 1,000 dicts 1.3 ms --
often as long as the task that made it.  A batch that continues the
sequential run in the same worker never moves it.

So the planner weighs the first ``WEIGHED`` results of each group that come
back through the pipe (``Weigher.weigh``): it pickles each once more, here,
and a group whose results take at least ``MOVE_COST`` to pickle (the
cheaper of the samples: a type's first pickling pays one-time costs) is
*costly to move*.  The planner places such a group as it places large
results (``Planner.large_result``): its batches get the large budget and
are cut where they leave the fewest such results behind.  A result of at
least ``MOVE_BYTES`` (``metrics.sizeof``) is costly without pickling it;
a tiny one (a number, a short string) is not, at once.

Figures (pickle.dumps, protocol 5, this machine): a 2,000-row DataFrame
144 µs (unpickling 191), a 20-value Series 65, 1,000 dicts 481, an 8 KB
array 14, a 60 KB array 22, a tuple of two numbers 1.
"""

from __future__ import annotations

import pickle
import time

from ..metrics import is_tiny, sizeof

__all__ = ["Weigher", "MOVE_COST", "MOVE_BYTES", "WEIGHED"]

#: Pickling seconds from which a group's results are costly to move (a
#: crossing pickles and unpickles each twice: about 4x this).  Below what a
#: 20-value Series takes on a machine twice as fast as this one (53-72 µs
#: here beside CPU hogs), above what an array under the shared-memory
#: threshold takes beside them (14-20 µs).
MOVE_COST = 25e-6
#: Bytes from which a result is costly to move without pickling it to see.
MOVE_BYTES = 1 << 20
#: How many results of each group are weighed.
WEIGHED = 2


class Weigher:
    """Samples of what pickling each group's results costs (see the module
    docstring).  ``decided`` holds the groups weighed enough: the caller
    checks it before calling ``weigh`` (one set lookup per task)."""

    __slots__ = ("decided", "_samples")

    def __init__(self):
        self.decided: set = set()
        self._samples: dict = {}  # group -> [results weighed, cheapest seconds]

    def weigh(self, g, value) -> bool | None:
        """Weigh one result of group ``g``: True once ``g`` is decided costly
        to move, False once decided not, None while undecided."""
        if is_tiny(value):
            self.decided.add(g)
            return False
        try:
            size = sizeof(value)
            if size is not None and size >= MOVE_BYTES:
                seconds = float("inf")
            else:
                t0 = time.perf_counter()
                pickle.dumps(value, protocol=5)
                seconds = time.perf_counter() - t0
        except Exception:  # (it crossed, so it pickles; whatever else: not costly)
            seconds = 0.0
        got = self._samples.get(g)
        if got is None:
            got = self._samples[g] = [0, seconds]
        got[0] += 1
        got[1] = min(got[1], seconds)
        if got[0] < WEIGHED and seconds >= MOVE_COST:
            return None  # (one more sample: the first may have paid one-time costs)
        self.decided.add(g)
        del self._samples[g]
        return got[1] >= MOVE_COST
