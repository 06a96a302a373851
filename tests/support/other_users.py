"""Another local user against localsched's shared memory (issue #35).

``run(kind, victim, attack)`` plays one scenario in a private mount
namespace with its own ``/dev/shm`` (a fresh tmpfs, mode 1777, as on any
Linux machine): a *victim* (root, or the unprivileged user
``localsched-victim``) runs four process-pool computations whose tasks
ship, return and consume large arrays, while an *attacker* (the user
``localsched-other``, with the system's Python and nothing of localsched)
plants names where the victim's segments are or will be.  The attacker
acts when a task asks it to (a request and an acknowledgement through
FIFOs: no timing), so each attack lands at the same point of every run:
after a worker has mapped its job's input and let its name go.

The attacks:

- ``file``: a regular file (mode 0666, a marker inside) at every absent
  name of the victim's job inputs and free list; a planted file the victim
  wrote into is overwritten (values altered) at the next request;
- ``symlink``: a symbolic link at those names to a file of the victim's
  (``fs.protected_symlinks`` is 0 on many machines);
- ``fifo``: a FIFO at a lock-file name of a made-up owner, before the
  victim starts (the sweeps' liveness check);
- ``regdir``: for the macOS kind, a symbolic link at the victim's registry
  directory (under a shared ``TMPDIR``) to a private directory of the
  victim's, re-pointed to the attacker's own directory mid-run.

The report says what counts: the victim's results (right or wrong),
whether it finished in time, its warnings, and every planted name still
there with its content (nothing deleted, read or written by the victim).
The unprivileged victim runs the project's Python, which lives under
``/root``: it gets ``CAP_DAC_READ_SEARCH`` to read it (reading, never
writing, and nothing about who may rename or unlink in ``/dev/shm``).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

ATTACKER, VICTIM = "localsched-other", "localsched-victim"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def can_run() -> str:
    """Why the scenarios cannot run here ("" if they can)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "needs root on Linux (two users, a private /dev/shm)"
    for tool in ("setpriv", "unshare", "useradd", "mount"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    if not os.path.exists("/usr/bin/python3"):
        return "needs a system python3 for the attacker"
    return ""


def ensure_users() -> tuple:
    """The attacker's and the unprivileged victim's (uid, gid), made if missing."""
    out = []
    for user in (ATTACKER, VICTIM):
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", user], check=True)
            pw = pwd.getpwnam(user)
        out.append((pw.pw_uid, pw.pw_gid))
    return tuple(out)


def _as(user: str, caps: bool = False) -> list:
    pw = pwd.getpwnam(user)
    cmd = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]
    if caps:
        cmd += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    return cmd


VICTIM_SCRIPT = r'''
import json, os, sys, uuid, warnings
import numpy as np
import dask
from dask import delayed
from localsched import multiprocessing as lmp

WORK = sys.argv[1]

def attack():
    ack = os.path.join(WORK, "acks", uuid.uuid4().hex)
    os.mkfifo(ack, 0o666)
    os.chmod(ack, 0o666)
    with open(os.path.join(WORK, "req"), "w") as f:
        f.write(ack + "\n")
    with open(ack) as f:
        f.read()
    os.unlink(ack)

def step(base, i):
    attack()
    return base + i

def combine(x, base):
    attack()
    return x * 2 - base

report = {"right": 0, "wrong": 0, "failed": [], "warnings": []}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(4):
        base = np.arange(100_000, dtype="f8")
        ys = [delayed(combine)(delayed(step)(base, i), base) for i in range(8)]
        try:
            out = dask.compute(*ys, scheduler=lmp.get, num_workers=2)
        except Exception as exc:
            report["failed"].append(f"{type(exc).__name__}: {exc}")
            continue
        for i, y in enumerate(out):
            report["right" if np.array_equal(y, base + 2 * i) else "wrong"] += 1
    lmp.shutdown()
report["warnings"] = [str(w.message) for w in caught
                      if issubclass(w.category, RuntimeWarning)]
print("REPORT " + json.dumps(report), flush=True)
'''

ATTACKER_SCRIPT = r'''
import json, os, sys

WORK, KIND, ATTACK, TARGET, MINE = sys.argv[1:6]
MARKER = b"planted by another user " * 64
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
planted = {}  # path -> what it was ("file", or the link's target)

def b36(n):
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = DIGITS[d] + out
        if not n:
            return out

def plant(path):
    if os.path.lexists(path):
        return
    try:
        if ATTACK == "symlink":
            os.symlink(TARGET, path)
            planted[path] = TARGET
        else:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
            os.write(fd, MARKER)
            os.fchmod(fd, 0o666)
            os.close(fd)
            planted[path] = "file"
    except OSError:
        pass

owners = set()

def attack_names():
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return
    for n in names:
        if KIND == "files" and n.startswith("localsched-") and n.endswith(".lock"):
            owners.add(n[len("localsched-"):-len(".lock")])
        elif KIND == "posix" and n.startswith("lsc") and "-" in n:
            owners.add(n[3:].split("-", 1)[0])
    for owner in owners:
        for t in range(1, 3):
            for j in range(300):
                if KIND == "files":
                    plant(f"/dev/shm/localsched-{owner}-{t}-{j}-in")
                else:
                    plant(f"/dev/shm/lsc{owner}-{b36(t)}-{b36(j)}-in")
        if KIND == "files":
            for n in range(40):
                plant(f"/dev/shm/localsched-{owner}-free-{n}")

def alter():
    # What the victim wrote into a planted file is the attacker's to change.
    for path, what in planted.items():
        if what != "file":
            continue
        try:
            with open(path, "r+b") as f:
                data = f.read()
                if data and data != MARKER:
                    read_any[0] = True
                    f.seek(0)
                    f.write(b"\xff" * len(data))
        except OSError:
            pass

read_any = [False]
if ATTACK == "fifo":
    path = "/dev/shm/localsched-1_dead.lock" if KIND == "files" else None
    if path:
        os.mkfifo(path, 0o666)
        planted[path] = "fifo"
elif ATTACK == "regdir":
    link = os.path.join(WORK, "tmp", f"localsched-{sys.argv[6]}")
    os.symlink(MINE, link)
    planted[link] = MINE
print("ready", flush=True)

req = os.open(os.path.join(WORK, "req"), os.O_RDWR)
buf = b""
while True:
    chunk = os.read(req, 4096)
    buf += chunk
    stop = False
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        ack = line.decode()
        if ack == "stop":
            stop = True
            break
        if ATTACK in ("file", "symlink"):
            alter()
            attack_names()
        elif ATTACK == "regdir" and planted.get(link) == MINE:
            os.unlink(link)
            os.symlink(os.path.join(WORK, "attacker"), link)
            planted[link] = os.path.join(WORK, "attacker")
        with open(ack, "w") as f:
            f.write("ok")
    if stop:
        break
with open(os.path.join(WORK, "attacker", "planted.json"), "w") as f:
    json.dump({"planted": planted, "read": read_any[0], "marker": MARKER.decode()}, f)
'''

DRIVER_SCRIPT = r'''
import json, os, signal, subprocess, sys

WORK, KIND, VICTIM_CMD, ATTACKER_CMD, TIMEOUT = (sys.argv[1], sys.argv[2], json.loads(sys.argv[3]),
                                                 json.loads(sys.argv[4]), float(sys.argv[5]))
subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,size=512m", "tmpfs", "/dev/shm"],
               check=True)
attacker = subprocess.Popen(ATTACKER_CMD, stdout=subprocess.PIPE, text=True)
ready = attacker.stdout.readline()
report = {"attacker_ready": ready.strip() == "ready"}
victim = subprocess.Popen(VICTIM_CMD, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, cwd=WORK)
try:
    out, err = victim.communicate(timeout=TIMEOUT)
    report["hung"] = False
except subprocess.TimeoutExpired:
    os.killpg(victim.pid, signal.SIGKILL)
    out, err = victim.communicate()
    report["hung"] = True
report["rc"] = victim.returncode
report["stderr"] = err[-3000:]
for line in out.splitlines():
    if line.startswith("REPORT "):
        report["victim"] = json.loads(line[7:])
with open(os.path.join(WORK, "req"), "w") as f:
    f.write("stop\n")
attacker.wait(timeout=60)
with open(os.path.join(WORK, "attacker", "planted.json")) as f:
    attack = json.load(f)
os.unlink(os.path.join(WORK, "attacker", "planted.json"))
marker = attack["marker"].encode()
report["planted"] = len(attack["planted"])
report["read"] = attack["read"]
report["gone"], report["changed"] = [], []
for path, what in attack["planted"].items():
    if not os.path.lexists(path):
        report["gone"].append(path)
    elif what == "file":
        with open(path, "rb") as f:
            if f.read() != marker:
                report["changed"].append(path)
    elif what == "fifo":
        if not os.path.exists(path):
            report["changed"].append(path)
    elif os.readlink(path) != what and not path.endswith(".lock"):
        report["changed"].append(path)
with open(os.path.join(WORK, "target"), "rb") as f:
    report["target_intact"] = f.read() == b"precious"
report["in_victims_dir"] = os.listdir(os.path.join(WORK, "mine"))
report["in_attackers_dir"] = os.listdir(os.path.join(WORK, "attacker"))
print("DRIVER " + json.dumps(report), flush=True)
'''


def run(kind: str, victim: str, attack: str, timeout: float = 90) -> dict:
    """Play one scenario: ``kind`` "files" or "posix" (the macOS kind,
    simulated), ``victim`` "root" or "user", ``attack`` as the module note
    says.  The driver's report (see ``DRIVER_SCRIPT``)."""
    (a_uid, a_gid), (v_uid, v_gid) = ensure_users()
    victim_uid = 0 if victim == "root" else v_uid
    work = tempfile.mkdtemp(prefix="lsc-users-")
    try:
        os.chmod(work, 0o755)
        for sub, owner, mode in (("acks", None, 0o1777), ("tmp", None, 0o1777),
                                 ("mine", victim_uid, 0o700), ("attacker", a_uid, 0o777),
                                 ("site", None, 0o755)):
            path = os.path.join(work, sub)
            os.mkdir(path)
            os.chmod(path, mode)
            if owner is not None:
                os.chown(path, owner, -1)
        os.mkfifo(os.path.join(work, "req"), 0o666)
        os.chmod(os.path.join(work, "req"), 0o666)
        target = os.path.join(work, "target")
        with open(target, "wb") as f:
            f.write(b"precious")
        os.chown(target, victim_uid, -1)
        os.chmod(target, 0o600)
        for name, text in (("victim.py", VICTIM_SCRIPT), ("attacker.py", ATTACKER_SCRIPT),
                           ("driver.py", DRIVER_SCRIPT)):
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        env_path = [ROOT]
        env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": work, "TMPDIR": work + "/tmp",
               "LANG": "C.UTF-8"}
        if kind == "posix":
            sys.path.insert(0, ROOT)
            from tests.support.macos_sim import MACOS_LIKE

            with open(os.path.join(work, "site", "sitecustomize.py"), "w") as f:
                f.write(MACOS_LIKE)
            env_path.insert(0, os.path.join(work, "site"))
        env["PYTHONPATH"] = os.pathsep.join(env_path)
        victim_cmd = ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable,
                      os.path.join(work, "victim.py"), work]
        if victim != "root":
            victim_cmd = _as(VICTIM, caps=True) + victim_cmd
        attacker_cmd = _as(ATTACKER) + ["/usr/bin/python3", "-I", os.path.join(work, "attacker.py"),
                                        work, kind, attack, target, os.path.join(work, "mine"),
                                        str(victim_uid)]
        proc = subprocess.run(
            ["unshare", "-m", "--propagation", "private", sys.executable,
             os.path.join(work, "driver.py"), work, kind, json.dumps(victim_cmd),
             json.dumps(attacker_cmd), str(timeout)],
            capture_output=True, text=True, timeout=timeout + 120)
        for line in proc.stdout.splitlines():
            if line.startswith("DRIVER "):
                return json.loads(line[7:])
        raise AssertionError(f"the scenario did not run: {proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-3000:]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
