"""What the dashboard's tests without a browser replay: a real run's task
records (to append into a Feed as a scheduler would) and a fake clock."""

from __future__ import annotations

from operator import add

from localsched.callbacks import Callback, Needs
from localsched.diagnostics.live.recorder import Recorder


class Clock:
    """A clock the test moves (``clock.t += 0.1``)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def recorded_run(n: int):
    """The RunLog of a real threaded run: ``n`` incs, ``n`` doubles, one sum."""
    from localsched.threaded import get

    dsk: dict = {("inc", i): (add, i, 1) for i in range(n)}
    dsk.update({("double", i): (add, ("inc", i), ("inc", i)) for i in range(n)})
    dsk["total"] = (sum, [("double", i) for i in range(n)])
    recorder = Recorder()

    class Records(Callback):
        needs = Needs(results=False, records=True)

        def __init__(self):
            super().__init__()
            self._start_state, self._finish = recorder.start_state, recorder.finish

    assert get(dsk, "total", callbacks=[Records()]) == sum(2 * (i + 1) for i in range(n))
    return recorder.runs[-1]


def live_feed(n: int) -> tuple:
    """``(done, run, clock, feed)``: a Feed (on a fake ``clock``) over an
    empty ``run`` of the keys of ``done``, a real run of ``n`` incs and
    doubles, whose records the test appends as the scheduler would."""
    from localsched.diagnostics.live.feed import Feed
    from localsched.diagnostics.live.recorder import RunLog

    done = recorded_run(n)
    run = RunLog(done.keys)
    run.started = min(r[1] for r in done.ends)
    recorder = Recorder()
    recorder.runs.append(run)
    clock = Clock(run.started)
    return done, run, clock, Feed(recorder, clock=clock)
