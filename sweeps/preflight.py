"""The tracking store, checked before anything runs, and said out loud.

A tracking server that is down costs minutes of MLflow's HTTP retries and a traceback; a read-only SQLite
file lets Ray start and every run fail to record. :func:`check_store` finds both in about a second, with one
message naming the store and the fix. :func:`describe_store` is the line every sweep prints first, so a sweep
launched from another directory (``tracking=sqlite`` is relative to it) does not silently record into a
second store.
"""

from __future__ import annotations

import os
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf

from sweeps.tracking import StoreURI

PROBE_SECONDS = 3.0
BUSY_SECONDS = 30.0  # how long a server that accepts but does not answer is asked again
#: MLflow's HTTP client defaults (7 retries with backoff, 120 s timeout) turn an outage into minutes;
#: these keep a server that goes down mid-sweep under a minute. Set either variable to override.
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
               "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}  # no "🏃 View run" line (and request) per run
ELSEWHERE = "record elsewhere with tracking.uri=sqlite:///PATH/mlflow.db, or record nothing with tracking=none"
#: filesystem types whose locking SQLite cannot rely on (NFS, Lustre, GPFS, SMB, Ceph, Gluster, BeeGFS, sshfs …)
NETWORK_FS = ("nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs",
              "beegfs", "fuse.sshfs", "9p", "afs", "panfs", "orangefs", "fuse.cephfs", "wekafs")
MOUNT_TABLE = Path("/proc/self/mountinfo")


class StoreUnusableError(CompactHydraException):
    """The tracking store cannot be written; nothing was run."""


def check_tracking(config: DictConfig) -> None:
    """Check the store ``config``'s ``tracking`` names (:func:`check_store`), then print where runs go."""
    HydraConfig.instance().set_config(config)  # the default store is relative to ${hydra:runtime.cwd}
    uri = OmegaConf.select(config, "tracking.uri", default=None)
    check_store(uri, OmegaConf.select(config, "tracking.artifact_root", default=None))
    print(describe_store(uri), flush=True)


def describe_store(uri: str | None) -> str:
    """Where runs are recorded and how to look at them.

    >>> describe_store("sqlite:////data/mlflow.db")
    'recording to sqlite:////data/mlflow.db — view with: mlflow ui --backend-store-uri sqlite:////data/mlflow.db'
    >>> describe_store(None)
    'recording nothing (tracking=none): runs are neither recorded nor skipped as done'
    """
    if not uri:
        return "recording nothing (tracking=none): runs are neither recorded nor skipped as done"
    if StoreURI(uri).remote:
        return f"recording to the MLflow server {uri} — view at {uri}"
    return f"recording to {uri} — view with: mlflow ui --backend-store-uri {uri}"


def check_store(uri: str | None, artifact_root: str | None = None) -> None:
    """Raise :class:`StoreUnusableError` when runs could not be recorded in ``uri`` (and its artifacts
    under ``artifact_root``); a server's HTTP retries are bounded from here on (:data:`HTTP_LIMITS`)."""
    if not uri:
        return
    store = StoreURI(uri)
    if store.remote:
        for name, value in HTTP_LIMITS.items():
            os.environ.setdefault(name, value)
        _probe_server(uri)
        return
    if store.sqlite_file is not None:
        _check_sqlite(uri, store.sqlite_file)
    elif store.folder is not None:
        _check_folder(store.folder, uri)
    if artifact_root:
        _check_folder(Path(artifact_root), f"the artifact folder {artifact_root} (tracking.artifact_root)")


def _probe_server(uri: str) -> None:
    """Requests with a short timeout: any HTTP answer (even 401 or 404) means someone is there; a refused or
    unresolvable address fails at once, a server that does not answer in time (busy) is asked again until
    :data:`BUSY_SECONDS` have passed."""
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=PROBE_SECONDS):
                return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError) and time.monotonic() < deadline:
                print(f"the MLflow tracking server {uri} has not answered in {PROBE_SECONDS:g} s; asking again for "
                      f"up to {BUSY_SECONDS:g} s (a busy server)", flush=True)
                continue
            reason = (f"no answer in {BUSY_SECONDS:g} s" if isinstance(reason, TimeoutError)
                      else getattr(reason, "strerror", None) or str(reason))
            parsed = urllib.parse.urlparse(uri)
            start = f"mlflow server --host {parsed.hostname} --port {parsed.port or 5000}"
            raise StoreUnusableError(f"the MLflow tracking server {uri} is not reachable ({reason}); start it "
                                     f"(`{start}`) or record locally with tracking=sqlite; nothing was run") from None


def _check_sqlite(uri: str, path: Path) -> None:
    """The SQLite file (or, before the first run, its folder) must be writable: SQLite opens a write-protected
    file read-only without complaint, so a write of its own ``user_version`` is tried and rolled back."""
    _check_folder(path.parent, uri, create=False)  # SQLite writes its journal beside the file
    shared = network_filesystem(path.parent)
    if shared is not None:
        print(f"warning: the SQLite store {path} lies on a network filesystem ({shared}), where SQLite's file "
              f"locking is unreliable: concurrent writers (Ray workers, two sweeps) can fail with 'database is "
              f"locked' or corrupt it; on a cluster use a tracking server (tracking=server "
              f"tracking.uri=http://HOST:5000, `mlflow server` on the head node), or a store on a local disk",
              flush=True)
    if not path.exists():  # a file is created and removed there: a folder that looks writable but is not a real
        # file system (/proc, /sys) makes MLflow retry for minutes
        probe = path.parent / f".schedlab-probe-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise StoreUnusableError(f"cannot record to {uri}: cannot create a file in {path.parent} "
                                     f"({error.strerror}); {ELSEWHERE}; nothing was run") from None
        return
    try:
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=PROBE_SECONDS)
        try:
            db.execute("BEGIN IMMEDIATE")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            db.execute(f"PRAGMA user_version = {int(version)}")
            db.rollback()
        finally:
            db.close()
    except sqlite3.OperationalError as error:
        if "locked" in str(error):  # another sweep is writing: it can be written, just not this second
            return
        raise StoreUnusableError(f"cannot record to {uri}: {path} is not writable ({error}); make it writable "
                                 f"(chmod u+w {path}) or {ELSEWHERE}; nothing was run") from None


def network_filesystem(folder: Path) -> str | None:
    """``"TYPE at MOUNT POINT"`` when ``folder`` lies on a network filesystem (its longest-matching mount in
    the mount table), else ``None`` (also when the table cannot be read)."""
    try:
        table = MOUNT_TABLE.read_text().splitlines()
    except OSError:
        return None
    target, best = str(folder.resolve()), ("", "")
    for line in table:
        fields, _, rest = line.partition(" - ")
        point = fields.split()[4].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, rest.split()[0])
    return f"{best[1]} at {best[0]}" if best[1] in NETWORK_FS else None


def _check_folder(folder: Path, what: str, create: bool = True) -> None:
    """``folder`` (or, when ``create``, its first existing parent) must be a writable folder."""
    existing = folder
    while create and not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise StoreUnusableError(f"cannot record to {what}: the folder {folder} does not exist; create it or "
                                 f"{ELSEWHERE}; nothing was run")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise StoreUnusableError(f"cannot record to {what}: the folder {existing} is not writable; make it writable "
                                 f"or {ELSEWHERE}; nothing was run")
