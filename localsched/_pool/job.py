"""What a worker process knows of the job it runs now.

Set by the worker loop (``localsched._pool.worker``), read by the
worker-side runtime (``localsched.worker.runtime``) through ``sys.modules``: the
pool does not import the scheduler, and the scheduler does not import the
pool for these.
"""

#: This worker's pid (0 in the caller's process: not a pool worker).
worker_pid: int = 0

#: ``(received, decoded, imported)`` of the current job, or None: epoch
#: seconds, and whether decoding it imported modules (a function pickled
#: by reference imports its module, and what that imports: its decoding
#: time is then start-up, not the inputs' travel).
arrival: "tuple[float, float, bool] | None" = None

#: Warnings this worker could not give itself (shared memory that filled
#: up): the worker loop sends them to the caller, who warns once.
notes: "list[str]" = []

#: Set by a job under a memory budget (``localsched.worker.budget_worker``): the
#: worker loop hands its freed memory back as soon as the job's reply is
#: sent, not once idle.
trim_after: bool = False

#: Seconds the last hand-off of records spent pickling them.
dump_seconds: float = 0.0

#: The task slot of the streaming job running now (a memoryview of 8-byte
#: integers, see ``localsched._pool.taskslot``), or None: the job's batch
#: runner takes it (sets this to None, so a computation nested in one of
#: its tasks cannot) and writes each task's index into ``[TASK]``.
task_slot = None
