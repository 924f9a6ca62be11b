"""One process per SQLite store: a lock file beside the database, held while a node serves.

`flock` on an open file: the OS drops the lock when its holder exits in any way (kill -9
included), so a restart never needs a manual clean-up, and a lock file left behind by a
dead holder is simply taken again. The holder writes its pid and listen address into the
file, for the refusal of a second process to name it. The file is never removed: removing
it would let a third process lock a new file while the second still holds the old one."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path


class StoreInUse(Exception):
    """Another process holds the store; `holder` says which (pid, listen address)."""

    def __init__(self, database: Path, holder: str) -> None:
        super().__init__(
            f"{database.parent} is in use by {holder}; one process serves a SQLite store"
        )
        self.database = database
        self.holder = holder


def lock_path(database: Path) -> Path:
    """The lock file of a SQLite database: beside it, in its data directory."""
    return database.with_name(database.name + ".lock")


class StoreLock:
    """An exclusive lock on a SQLite database's lock file, until `release`."""

    def __init__(self, database: Path, listen: str) -> None:
        """Takes the lock or raises StoreInUse naming the holder; never waits."""
        self.path = lock_path(database)
        # Opened without truncating: the holder's pid stays readable until the lock is ours.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read(fd))
            os.close(fd)
            raise StoreInUse(database, holder) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        self.record(listen)

    def record(self, listen: str) -> None:
        """Writes this process's pid and listen address into the lock file."""
        assert self._fd is not None, "the lock was released"
        text = json.dumps({"pid": os.getpid(), "listen": listen}) + "\n"
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text.encode(), 0)

    def release(self) -> None:
        """Gives the lock up (closing the file does); a second call does nothing."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _read(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict[str, object]) -> str:
    pid, listen = holder.get("pid"), holder.get("listen")
    if pid is None:
        return "another process (it has not written its pid yet)"
    where = f", listening on {listen}" if listen else ""
    return f"another factnode (pid {pid}{where})"
