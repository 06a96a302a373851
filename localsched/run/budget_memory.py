"""The real memory a budget keeps under its limit, read now and then.

Sizes miss what tasks allocate while they run and what the allocator
keeps; so the budget (``localsched.run.budget``) also reads the memory of
the process tree and spills against the larger of the two.  On threads and
sync: this process's RSS (one small read of ``/proc/self/statm``).  On
processes each byte once: the private memory of this process and of its
workers (RSS less file pages -- libraries, code the OS can page out -- and
less shared pages) plus the shared memory the run's segment store made
(files in ``/dev/shm`` are RAM in no process's private RSS).  The workers
are found through ``/proc/PID/task/TID/children`` and read from their
``statm``: a few small reads, where ``psutil``'s ``children()`` (the
fallback) scans every process on the machine, milliseconds a reading.
"""

from __future__ import annotations

import os
import stat
import sys

__all__ = ["real_memory", "shm_bytes_held"]


def real_memory(processes: bool) -> int:
    """This process's RSS; on processes, the private memory of this process
    and its workers and the store's shared memory, each byte once."""
    if not processes:
        return _self_rss()
    shm, every_file = shm_bytes_held()
    total = shm + _self_private(shared_too=not every_file)
    pids = _descendants()
    if pids is not None:
        for pid in pids:
            total += _private_of(pid)
        return total
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                m = child.memory_info()
                total += m.rss - getattr(m, "shared", 0)
            except psutil.Error:
                pass
    except Exception:  # noqa: BLE001 -- a reading that fails reads as nothing more
        pass
    return total


def _self_rss() -> int:
    """This process's resident set, in bytes (cheap: one small read on Linux)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        import psutil

        return int(psutil.Process().memory_info().rss)


def _self_private(shared_too: bool = False) -> int:
    """This process's resident memory less its file pages, and less its
    shared pages unless ``shared_too``."""
    try:
        with open("/proc/self/status", "rb") as f:
            text = f.read()
        total = 0
        for field in (b"RssAnon:", b"RssShmem:") if shared_too else (b"RssAnon:",):
            at = text.index(field) + len(field)
            total += int(text[at:text.index(b"kB", at)]) * 1024
        return total
    except (OSError, ValueError):
        import psutil

        m = psutil.Process().memory_info()
        return int(m.rss - getattr(m, "shared", 0))


def _descendants() -> list[int] | None:
    """The pids of this process's children, theirs, and so on, from each
    thread's ``/proc/PID/task/TID/children`` (Linux); None where that
    cannot be read (``psutil`` then scans every process: milliseconds)."""
    me = os.getpid()
    found: list[int] = []
    todo = [me]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            if pid == me:
                return None
            continue  # (a child that has gone since listed)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    kids = [int(k) for k in f.read().split()]
            except FileNotFoundError:
                if pid == me and tid == str(me):
                    return None  # (a kernel without CONFIG_PROC_CHILDREN)
                continue  # (a thread or a process that has gone since listed)
            except (OSError, ValueError):
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def _private_of(pid: int) -> int:
    """A process's resident memory less its shared pages (file and shared
    memory), as psutil's ``rss - shared``: 0 once it has gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            fields = f.read().split()
        return (int(fields[1]) - int(fields[2])) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def shm_bytes_held() -> tuple[int, bool]:
    """Bytes of shared memory this process's segment store has made (RAM,
    in no process's private RSS), and whether that is every one of its
    files: where segments are files (``/dev/shm``), their blocks, read from
    the directory -- live segments, the free list, and those workers wrote
    for records not handled yet (the store learns of them later); else
    the store's own count, which leaves out what this process maps.
    The one place the budget reads the store."""
    store_module = sys.modules.get("localsched._shm.store")
    if store_module is None:  # (no pool has made one: nothing held)
        return 0, True
    total, complete = 0, True
    for store in store_module.stores():
        held = _files_held(store)
        if held is None:  # (not files: the store's own count)
            total += store.bytes_held()
            complete = False
        else:
            total += held
    return total, complete


def _files_held(store) -> int | None:
    """The blocks of ``store``'s files in its directory, or None where its
    segments are not files one can list (or the listing failed)."""
    if not getattr(store.kind, "maps_by_descriptor", False):
        return None
    prefix, total = store.prefix, 0
    try:
        with os.scandir(store.kind.directory) as entries:
            for entry in entries:
                if entry.name.startswith(prefix):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:  # (gone since listed)
                        continue
                    if stat.S_ISREG(st.st_mode):
                        total += st.st_blocks * 512
    except OSError:
        return None
    return total
