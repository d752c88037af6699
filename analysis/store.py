"""A local MLflow store, checked before MLflow opens it: reading never creates, migrates or damages one.

Handed an SQLite path, MLflow creates the file when it is absent, writes its schema into an empty or
foreign database, migrates one that lacks newer tables and adds a missing default experiment; handed
random bytes, it dies in a SQLAlchemy traceback. :func:`check_store` refuses each case with one line
naming the file and what is wrong, reading only the file's header and its table list through a
read-only connection: a refused store is left byte for byte as it was, with nothing added beside it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote, urlparse

from analysis import AnalysisError

SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file
UNTOUCHED = "left untouched: reading runs never creates, migrates or writes a store"
CHECK = f"{UNTOUCHED} (check --tracking-uri)"
MISSING = "(run `make run` first, or pass --tracking-uri)"


def check_store(uri: str) -> None:
    """Raise :class:`AnalysisError` (one line) unless a local store ``uri`` can be read as it is.

    Servers and other databases are MLflow's to check; an SQLite file must exist, start with SQLite's
    header and hold every table this MLflow expects plus the default experiment (else MLflow would
    write them); a folder store must be a folder.

    >>> check_store("sqlite:////nowhere/mlflow.db")
    Traceback (most recent call last):
    analysis.AnalysisError: no MLflow store at /nowhere/mlflow.db (run `make run` first, or pass --tracking-uri)
    """
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = uri.removeprefix("sqlite:///").split("?", 1)[0] if uri.startswith("sqlite:///") else ""
        if path not in ("", ":memory:"):
            _check_sqlite(Path(path))
    elif parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme == "file" else uri)
        if not path.exists():
            raise AnalysisError(f"no MLflow store at {path} {MISSING}")
        if not path.is_dir():
            raise AnalysisError(f"{path} is a file, not an MLflow store folder; an SQLite store is given as "
                                f"sqlite:///{path.resolve()}")


def _check_sqlite(path: Path) -> None:
    if not path.exists():
        raise AnalysisError(f"no MLflow store at {path} {MISSING}")
    if path.is_dir():
        raise AnalysisError(f"{path} is a folder, not an SQLite file (an MLflow store); check --tracking-uri")
    try:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise AnalysisError(f"cannot read the MLflow store {path}: {exc.strerror}") from None
    if not header:
        raise AnalysisError(f"{path} is an empty file (0 bytes), not an MLflow store; {CHECK}")
    if header != SQLITE_HEADER:
        raise AnalysisError(f"{path} is not an SQLite database (an MLflow store): it does not start with "
                            f"SQLite's header; {CHECK}")
    tables, has_default = _contents(path)
    expected = mlflow_tables()
    if not {"experiments", "runs"} <= tables:
        raise AnalysisError(f"{path} is an SQLite database without MLflow's experiments and runs tables, not an "
                            f"MLflow store; {CHECK}")
    absent = sorted(expected - tables)
    if absent:
        import mlflow

        raise AnalysisError(
            f"{path} lacks {len(absent)} of the {len(expected)} tables MLflow {mlflow.__version__} expects "
            f"({', '.join(absent[:3])}{' …' if len(absent) > 3 else ''}): a store of an older MLflow, {UNTOUCHED}; "
            f"back it up, then `mlflow db upgrade sqlite:///{path.resolve()}`")
    if not has_default:
        raise AnalysisError(f"{path} has no default experiment (id 0), which MLflow would write into it; {CHECK}")


def _contents(path: Path) -> tuple[set[str], bool]:
    """The file's table names and whether it has MLflow's default experiment, read through a
    read-only connection — ``immutable`` (no lock, no ``-shm`` file left beside the store) unless a
    writer's ``-wal`` or ``-journal`` file says the store is in use."""
    busy = any(path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-journal"))
    try:
        db = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro{'' if busy else '&immutable=1'}", uri=True,
                             timeout=10)
    except sqlite3.Error as exc:
        raise AnalysisError(f"cannot open the MLflow store {path} ({exc})") from None
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        default = "experiments" in tables and db.execute(
            "SELECT 1 FROM experiments WHERE experiment_id = 0").fetchone() is not None
    except sqlite3.OperationalError as exc:
        raise AnalysisError(f"cannot read the MLflow store {path} ({exc})") from None
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # damaged pages, or names that are not text
        raise AnalysisError(f"{path} is a damaged SQLite database ({exc}), not a readable MLflow store; "
                            f"{CHECK}") from None
    finally:
        db.close()
    return tables, default


def mlflow_tables() -> set[str]:
    """The tables this MLflow's SQL store expects (missing ones it would create on opening the store)."""
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401  (defines the tables on Base)
    from mlflow.store.db.base_sql_model import Base

    return set(Base.metadata.tables)
