"""The task stream's tiny tasks, merged: tasks shorter than a pixel share
one rectangle per worker lane, task group and time bin (never dropped: a
rectangle counts its tasks), and the groups of one lane and bin sit side by
side in its span.  Pure numpy over a take-in's columns: no Python code per
task (the feed's server thread shares the GIL with the scheduler)."""

from __future__ import annotations

import numpy as np

__all__ = ["merge_tiny", "side_by_side"]


def merge_tiny(idx, starts, ends, lane, gids, width: float, most: int) -> tuple | None:
    """Tasks ``idx`` merged per lane, group and time bin ``width`` wide:
    ``(a task of each rectangle, its left, right, count)`` (lists but the
    first), ordered by lane, group and bin; None if more than ``most``.
    Counted with ``bincount`` and ``ufunc.at`` when the bins are few (no
    sort), else sorted.  The groups of one lane and bin share its span side
    by side (``side_by_side``)."""
    first_start = starts[idx]
    busy = ends[idx] - first_start
    bins = np.floor((first_start - first_start.min()) / width).astype(np.int64)
    ngroups, nbins = int(gids.max()) + 1, int(bins.max()) + 1
    code = (lane[idx] * ngroups + gids[idx]) * nbins + bins
    size = int(code.max()) + 1
    if size <= 4 * len(idx) + 4096:
        counts = np.bincount(code, minlength=size)
        used = np.flatnonzero(counts)
        if len(used) > most:
            return None
        lo = np.full(size, np.inf)
        np.minimum.at(lo, code, first_start)
        hi = np.full(size, -np.inf)
        np.maximum.at(hi, code, ends[idx])
        some = np.empty(size, np.int64)
        some[code] = idx  # (any task of a rectangle: the only one of a single)
        seconds = np.bincount(code, weights=busy, minlength=size)[used]
        lo, hi = side_by_side(used, lo[used], hi[used], seconds, counts[used], ngroups, nbins)
        return some[used], lo.tolist(), hi.tolist(), counts[used].tolist()
    order = np.argsort(code, kind="stable")
    cuts = np.flatnonzero(np.diff(code[order])) + 1
    if len(cuts) + 1 > most:
        return None
    first = np.concatenate(([0], cuts))
    sel = idx[order]
    counts = np.diff(np.concatenate((first, [len(sel)])))
    lo, hi = side_by_side(code[order][first], np.minimum.reduceat(starts[sel], first),
                           np.maximum.reduceat(ends[sel], first),
                           np.add.reduceat(busy[order], first), counts, ngroups, nbins)
    return sel[first], lo.tolist(), hi.tolist(), counts.tolist()


def side_by_side(codes, lo, hi, seconds, counts, ngroups: int, nbins: int) -> tuple:
    """The merged rectangles of several groups in one lane and bin, drawn
    over one span, would hide all but the last (a tree's leaves vanished
    under its sums): they share the bin's span side by side instead, each
    as wide as its share of their busy seconds (of their tasks, if none).
    ``codes``: each rectangle's (lane, group, bin) code, ascending."""
    cell = codes // (ngroups * nbins) * nbins + codes % nbins  # (lane, bin)
    order = np.argsort(cell, kind="stable")
    cells = cell[order]
    new = np.concatenate(([True], cells[1:] != cells[:-1]))
    if new.all():  # (one group in every lane and bin: as they are)
        return lo, hi
    heads = np.flatnonzero(new)
    member = np.cumsum(new) - 1  # each rectangle's cell, in sorted order
    weight = seconds[order]
    total = np.add.reduceat(weight, heads)
    if not total.all():  # (cells of instant tasks: by their counts)
        none = (total == 0)[member]
        weight = np.where(none, counts[order], weight)
        total = np.add.reduceat(weight, heads)
    upto = np.cumsum(weight)
    before = upto - weight - (upto - weight)[heads][member]
    left = np.minimum.reduceat(lo[order], heads)[member]
    span = np.maximum.reduceat(hi[order], heads)[member] - left
    out_lo, out_hi = np.empty_like(lo), np.empty_like(hi)
    out_lo[order] = left + span * before / total[member]
    out_hi[order] = left + span * (before + weight) / total[member]
    return out_lo, out_hi
