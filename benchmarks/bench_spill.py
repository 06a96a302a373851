"""How fast the spill store writes and reads a large NumPy array, next to
the disk's own sequential speed in the same directory (issue 34's bar:
spilling writes at no less than half of it).

Each round, alternating so that the machine's load falls on both alike:

- ``raw write``: ``os.write`` of the array's bytes to a fresh file in the
  same directory, 64 MiB per call (what ``dd bs=64M`` does), then close;
- ``spill put``: ``SpillStore.put`` of the array (pickle protocol 5, the
  buffer written from the array itself);
- ``raw read`` / ``spill get``: reading the bytes back into a fresh
  ``bytearray`` (``readinto``), against ``SpillStore.get``;
- with ``--fsync``, both writes end with ``fsync`` (the disk's speed, not
  the page cache's).

Prints GB/s per round and the median ratio spill / raw.

    python benchmarks/bench_spill.py [--size-mb 1024] [--rounds 5] [--dir DIR] [--fsync]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from localsched.run.spill import SpillStore

CHUNK = 64 << 20


def raw_write(directory: str, view: memoryview, fsync: bool) -> float:
    path = os.path.join(directory, "raw.bin")
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for i in range(0, view.nbytes, CHUNK):
            chunk = view[i:i + CHUNK]
            done = 0
            while done < chunk.nbytes:
                done += os.write(fd, chunk[done:])
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def raw_read(directory: str, nbytes: int) -> float:
    path = os.path.join(directory, "raw.bin")
    t0 = time.perf_counter()
    buf = bytearray(nbytes)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        got = 0
        while got < nbytes:
            got += f.readinto(view[got:got + CHUNK])
    elapsed = time.perf_counter() - t0
    os.unlink(path)
    return elapsed


def spill_put(store: SpillStore, array: np.ndarray, fsync: bool) -> float:
    t0 = time.perf_counter()
    store.put(1, array)
    if fsync:
        assert store.directory is not None
        fd = os.open(os.path.join(store.directory, "1.spill"), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return time.perf_counter() - t0


def spill_get(store: SpillStore) -> float:
    t0 = time.perf_counter()
    back = store.get(1)
    elapsed = time.perf_counter() - t0
    del back
    store.drop(1)
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dir", default=None, help="directory (default: the temp directory)")
    p.add_argument("--fsync", action="store_true")
    args = p.parse_args()
    root = args.dir or tempfile.gettempdir()
    array = np.random.default_rng(0).random(args.size_mb * (1 << 20) // 8)
    gb = array.nbytes / 1e9
    print(f"{array.nbytes / (1 << 20):.0f} MiB in {root}, fsync={args.fsync}, "
          f"load average {os.getloadavg()[0]:.1f}")
    rows = []
    with SpillStore(root) as store, tempfile.TemporaryDirectory(dir=root) as raw_dir:
        for r in range(args.rounds):
            first_spill = r % 2 == 1
            if first_spill:
                sw = spill_put(store, array, args.fsync)
                sr = spill_get(store)
            rw = raw_write(raw_dir, memoryview(array).cast("B"), args.fsync)
            rr = raw_read(raw_dir, array.nbytes)
            if not first_spill:
                sw = spill_put(store, array, args.fsync)
                sr = spill_get(store)
            rows.append((rw, sw, rr, sr))
            print(f"round {r}: write raw {gb / rw:5.2f} GB/s spill {gb / sw:5.2f} GB/s "
                  f"({rw / sw:4.2f}x) | read raw {gb / rr:5.2f} GB/s spill {gb / sr:5.2f} GB/s "
                  f"({rr / sr:4.2f}x)")
    w = statistics.median(rw / sw for rw, sw, _, _ in rows)
    rd = statistics.median(rr / sr for _, _, rr, sr in rows)
    best = [min(column) for column in zip(*rows, strict=True)]
    print(f"median spill/raw speed: write {w:.2f}x, read {rd:.2f}x; best of each: write raw "
          f"{gb / best[0]:.2f} spill {gb / best[1]:.2f} GB/s ({best[0] / best[1]:.2f}x), read "
          f"raw {gb / best[2]:.2f} spill {gb / best[3]:.2f} GB/s ({best[2] / best[3]:.2f}x) "
          f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
