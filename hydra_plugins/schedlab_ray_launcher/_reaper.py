"""A local Ray instance ends with the driver that started it, and a Ray that dies under a sweep says so.

Ray's processes for ``ray.init()`` (GCS, raylet, agents) outlive a SIGKILLed driver by minutes; and when
the raylet dies (killed, out of memory) Ray ends the driver from C++ — no ``finally`` runs, the user sees
only Ray's state dump. Starting a local instance, the driver also starts a small reaper in its own session
(Ctrl-C in the terminal does not reach it), which watches the driver and the raylet (a pidfd each: which ended
first is known, e.g. a killed DashboardAgent takes the raylet with it, then Ray ends the driver); once the driver
exits it
- says in one line on the driver's stderr that the sweep was ended by its Ray instance dying, when the
  raylet died first (killed, out of memory, or with a killed agent) and the driver had not shut Ray down
  itself (:meth:`Reaper.released` leaves a mark);
- SIGKILLs every process whose command line names the instance's session folder, every process seen below
  them while the driver lived and every process with a file of that folder open (the agents and workers name
  it nowhere — Ray retitles them ``ray::DashboardAgent`` … — and the raylet dies with the driver, orphaning
  them, possibly before the reaper's last look).
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

GRACE_SECONDS = 2.0
DIED = ("schedlab: the local Ray instance died under the sweep (its raylet ended: killed, out of memory, or with "
        "a Ray agent that died); "
        "runs recorded before are kept — rerun the same command to resume")

REAPER = """
import os, select, sys, time
driver, session, mark, grace, died = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]

def table():
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rpartition(")")[2].split()
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    command = handle.read().replace(b"\\0", b" ").decode(errors="replace")
            except (OSError, IndexError):
                continue
            found[int(entry)] = (int(fields[1]), fields[19], command)
    return found

def family(found):
    children = {}
    for pid, (ppid, _, _) in found.items():
        children.setdefault(ppid, []).append(pid)
    todo, members = [pid for pid, (_, _, command) in found.items() if session in command], {}
    while todo:
        pid = todo.pop()
        if pid not in members:
            members[pid] = found[pid][1]
            todo.extend(children.get(pid, []))
    return members

def holds_session(pid):
    try:
        return any(session in os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False

try:
    watch = os.pidfd_open(driver)
except OSError:  # no pidfd (old kernel): poll the parent
    watch = None
lost, known, raylet = False, {}, None
while True:
    found = table()
    known.update(family(found))
    rays = [pid for pid, (_, _, command) in found.items()
            if session in command and "raylet" in command.split(" ", 1)[0]]
    lost = lost or not rays
    if raylet is None and rays and watch is not None and not lost:
        try:
            raylet = os.pidfd_open(rays[0])
        except OSError:
            pass
    if watch is not None:
        ready = select.select([fd for fd in (watch, raylet) if fd is not None], [], [], 0.5)[0]
        if raylet is not None and raylet in ready and watch not in ready:  # it ended while the driver lived
            lost, raylet = True, None
        if watch in ready:
            break
    elif os.getppid() != driver:
        break
    else:
        time.sleep(0.5)
if not os.path.exists(mark):  # not shut down by the driver: give a dying driver's own clean-up a moment
    time.sleep(grace)
    if lost:
        print(died, file=sys.stderr, flush=True)
found = table()
known.update(family(found))
known.update({pid: started for pid, (_, started, _) in found.items() if pid not in known and holds_session(pid)})
for pid, started in known.items():
    if pid in found and found[pid][1] == started:  # the same process, not a reused pid
        try:
            os.kill(pid, 9)
        except OSError:
            pass
try:
    os.unlink(mark)
except OSError:
    pass
"""


class Reaper:
    """The reaper of one local Ray instance (see the module docstring)."""

    def __init__(self, session_dir: str) -> None:
        handle, self.mark = tempfile.mkstemp(prefix="schedlab-ray-")
        os.close(handle)
        os.unlink(self.mark)
        self.process = subprocess.Popen(
            [sys.executable, "-c", REAPER, str(os.getpid()), session_dir, self.mark, str(GRACE_SECONDS), DIED],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)

    def released(self) -> None:
        """The driver shuts Ray down itself: its raylet ending now is no failure."""
        Path(self.mark).touch()
