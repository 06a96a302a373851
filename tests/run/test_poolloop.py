"""The pool loop's batches on threads (``localsched.run.poolloop``): a worker
is handed its next batch once its last task is reported, without waiting
for the batch's future; a batch that goes wrong still reaches the loop."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future

import pytest

from localsched import threaded


def inc(x):
    return x + 1


class LateFutures(Executor):
    """Runs each call on a thread of its own and resolves its future only
    once the next call has been submitted (or, when none comes, once the
    test ends, or after ``patience`` seconds: a loop that waits for the
    future before it submits again is then merely slow, not hung).

    ``pending_at_submit``: for each call, whether an earlier call's future
    was still unresolved when it was submitted."""

    def __init__(self, patience: float = 10.0):
        self.patience = patience
        self.futures: list = []
        self.released: list = []  # one Event per call: resolve its future
        self.threads: list = []
        self.pending_at_submit: list = []
        self.lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        fut: Future = Future()
        with self.lock:
            self.pending_at_submit.append(any(not f.done() for f in self.futures))
            if self.released:
                self.released[-1].set()  # (the previous call may resolve now)
            release = threading.Event()
            self.futures.append(fut)
            self.released.append(release)
        t = threading.Thread(target=self._run, args=(fut, release, fn, args, kwargs))
        self.threads.append(t)
        t.start()
        return fut

    def _run(self, fut, release, fn, args, kwargs) -> None:
        fut.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 -- the future's
            release.wait(self.patience)
            fut.set_exception(exc)
            return
        release.wait(self.patience)
        fut.set_result(result)

    def close(self) -> None:
        with self.lock:
            for e in self.released:
                e.set()
        for t in self.threads:
            t.join()


@pytest.fixture
def late():
    pool = LateFutures()
    yield pool
    pool.close()


def test_a_thread_worker_gets_its_next_batch_once_its_last_task_is_reported(late):
    # One task per batch (chunksize=1), one worker: each batch of the chain
    # goes out once the previous one's record arrived, while the previous
    # batch's future is still unresolved (the pool resolves it only when
    # the next call comes).  Before: the loop waited for that future first.
    dsk = {"a": 0, "b": (inc, "a"), "c": (inc, "b"), "d": (inc, "c")}
    assert threaded.get(dsk, "d", pool=late, num_workers=1, chunksize=1) == 3
    assert late.pending_at_submit == [False, True, True]


def test_a_batch_stopped_before_its_last_task_still_fails_the_run(monkeypatch):
    # A thread batch that returns without reporting its last task (here: a
    # batch runner that drops it) is the loop's to notice: its future comes
    # back and the run fails, instead of waiting forever for the record.
    from localsched.run import poolloop

    real = poolloop.run_batch

    def drops_last(batch, *args, **kwargs):
        return real(batch[:-1], *args, **kwargs)

    monkeypatch.setattr(poolloop, "run_batch", drops_last)
    dsk = {"a": 0, "b": (inc, "a"), "c": (inc, "b"), "out": (sum, ["b", "c"])}
    with pytest.raises(Exception, match="never reported"):
        threaded.get(dsk, "out", num_workers=1, chunksize=2)


def test_an_announced_batch_frees_its_worker_at_its_task_end_not_its_start(late):
    # A pretask hook wanting exact starts makes each batch announce itself
    # as it starts; that announcement names the batch's task too, and must
    # not count as the batch's end (the next task would be planned on a
    # worker still busy, and the run would stall with nothing in flight).
    from localsched.callbacks import Callback

    started = []
    dsk = {"a": 0, "b": (inc, "a"), "c": (inc, "b"), "d": (inc, "c")}
    with Callback(pretask=lambda key, dsk, state: started.append(key)):
        assert threaded.get(dsk, "d", pool=late, num_workers=1, chunksize=1) == 3
    assert started == ["b", "c", "d"]
    assert late.pending_at_submit == [False, True, True]
