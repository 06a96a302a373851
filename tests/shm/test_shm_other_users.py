"""Shared memory beside another local user (issue #35): every scenario of
``tests/support/other_users.py`` -- planted files and links at the names of a
victim's segments, a FIFO at a lock file's name, a registry directory
that is a link -- against a root victim and an unprivileged one, on the
files of Linux and the macOS kind.  What a user relies on: no value read
or altered, no hang, nothing of the other user's deleted or written, no
computation failed, one warning at most."""

from __future__ import annotations

import pytest

from tests.support import other_users

pytestmark = pytest.mark.skipif(bool(other_users.can_run()), reason=other_users.can_run())


def _check(report: dict) -> None:
    assert report["attacker_ready"]
    assert not report["hung"], "the victim hung"
    victim = report.get("victim")
    assert victim is not None, f"the victim crashed (rc {report['rc']}): {report['stderr']}"
    assert not victim["failed"], victim["failed"]
    assert victim["wrong"] == 0 and victim["right"] == 32, victim
    assert not report["read"], "the victim wrote its values into another user's file"
    assert not report["gone"], f"another user's files deleted: {report['gone'][:5]}"
    assert not report["changed"], f"another user's files changed: {report['changed'][:5]}"
    assert report["target_intact"], "a file a planted link points to was written"
    assert len(victim["warnings"]) <= 1, victim["warnings"]
    assert not report["in_attackers_dir"], report["in_attackers_dir"]
    assert "Traceback" not in report["stderr"], report["stderr"]


@pytest.mark.parametrize("victim", ["root", "user"])
@pytest.mark.parametrize("attack", ["file", "symlink"])
@pytest.mark.parametrize("kind", ["files", "posix"])
def test_names_planted_where_segments_were_are_never_used(kind, attack, victim):
    _check(other_users.run(kind, victim, attack))


@pytest.mark.parametrize("victim", ["root", "user"])
def test_a_fifo_at_a_lock_files_name_hangs_nothing(victim):
    _check(other_users.run("files", victim, "fifo", timeout=60))


@pytest.mark.parametrize("victim", ["root", "user"])
def test_a_registry_directory_that_is_a_link_is_not_used(victim):
    report = other_users.run("posix", victim, "regdir")
    _check(report)
    assert not report["in_victims_dir"], report["in_victims_dir"]
