"""A full disk under a node's data directory: writes are RESOURCE_EXHAUSTED naming the data
directory (never INTERNAL), reads are served, writes come back once space is freed, and
nothing acknowledged is lost after kill -9. The disk is a small tmpfs mounted for the test
(root only; skipped where mounting is not allowed)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from _e2e import RPC_TIMEOUT, open_channel, start_server

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

# Above the SQLite log's bound (64 MiB, bench/README.md): the log itself never fills it.
DISK_SIZE = "96m"
GROWN_SIZE = "256m"
NS = "disk:full"
MAX_WRITES_TO_FILL = 5000  # bound on the writes it takes a full disk to refuse one
RECOVER_SECONDS = 20.0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_SIZE mounted under the test's directory, unmounted afterwards."""
    mount, umount = shutil.which("mount"), shutil.which("umount")
    if os.geteuid() != 0 or mount is None or umount is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    point = tmp_path / "disk"
    point.mkdir()
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        timeout=RPC_TIMEOUT,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        # Lazily: a killed node's files are closed by then, but be sure not to fail on it.
        subprocess.run([umount, "-l", str(point)], capture_output=True, timeout=RPC_TIMEOUT)


def fact(i: int) -> pb.SubmitFactRequest:
    """Fact `i`: its own key, about a hundred bytes."""
    return pb.SubmitFactRequest(
        fact=pb.FactInput(
            key=pb.Key(namespace=NS, subject=f"s{i:06d}", predicate="lives_in"),
            object=f"value {i:06d} " + "x" * 60,
            anchor="user_stated",
            source="disk-test",
        )
    )


def grow(disk: Path) -> None:
    """Remounts the test's tmpfs at GROWN_SIZE: room for far more than the log's bound."""
    mount = shutil.which("mount")
    assert mount is not None
    subprocess.run(
        [mount, "-o", f"remount,size={GROWN_SIZE}", str(disk)],
        check=True, capture_output=True, timeout=RPC_TIMEOUT,
    )  # fmt: skip


def fill(disk: Path) -> Path:
    """Writes a ballast file until the disk has no room left; returns it."""
    ballast = disk / "ballast"
    chunk = b"\0" * 65536
    with open(ballast, "wb", buffering=0) as out:
        while True:
            try:
                out.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
    with open(ballast, "ab", buffering=0) as out:  # and the last few bytes
        for _ in range(65536):
            try:
                out.write(b"\0")
            except OSError:
                break
    return ballast


@pytest.mark.slow
def test_a_full_disk_refuses_writes_clearly_serves_reads_and_recovers(
    tmp_path: Path, small_disk: Path
) -> None:
    """Writes on a full disk are RESOURCE_EXHAUSTED naming the data directory, SubmitFacts
    too; reads keep answering; once space is freed writes succeed; after kill -9 and a
    restart every acknowledged fact is believed."""
    data_dir = small_disk / "data"
    node = start_server(tmp_path, data_dir=data_dir)
    acknowledged: list[int] = []
    codes: set[grpc.StatusCode] = set()
    try:
        channel = open_channel(node.address)
        facts = pb_grpc.FactServiceStub(channel)
        for i in range(200):
            facts.SubmitFact(fact(i), timeout=RPC_TIMEOUT)
            acknowledged.append(i)
        ballast = fill(small_disk)

        # Writes until the full disk refuses one (the log may have room left for a few).
        refusal: grpc.RpcError | None = None
        n = 200
        for n in range(200, 200 + MAX_WRITES_TO_FILL):
            try:
                facts.SubmitFact(fact(n), timeout=RPC_TIMEOUT)
                acknowledged.append(n)
            except grpc.RpcError as err:
                refusal = err
                break
        assert refusal is not None, f"{MAX_WRITES_TO_FILL} writes on a full disk all succeeded"
        codes.add(refusal.code())
        assert refusal.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, refusal
        message = refusal.details() or ""
        assert str(data_dir.resolve()) in message and "no space left" in message, message
        # Refused again, unary and streamed alike, never INTERNAL. Not every later write need
        # fail: a refused commit's rolled-back log frames leave their room on the disk, and a
        # smaller write may fit there; one that does is acknowledged like any other.
        refusals = 0
        m = n + 1
        for m in range(n + 1, n + 1 + MAX_WRITES_TO_FILL):
            try:
                facts.SubmitFact(fact(m), timeout=RPC_TIMEOUT)
                acknowledged.append(m)
            except grpc.RpcError as err:
                codes.add(err.code())
                refusals += 1
                if refusals == 3:
                    break
        assert refusals == 3, f"{refusals} of the writes after the first refusal were refused"
        streamed_refused = False
        for s in range(m + 1, m + 1 + 2 * MAX_WRITES_TO_FILL, 2):
            try:
                facts.SubmitFacts(iter([fact(s), fact(s + 1)]), timeout=RPC_TIMEOUT)
                acknowledged.extend((s, s + 1))
            except grpc.RpcError as err:
                codes.add(err.code())
                streamed_refused = True
                break
        assert streamed_refused, "no stream was refused on a full disk"
        assert codes == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        n = s + 1

        # Reads are served meanwhile.
        belief = facts.GetBelief(pb.GetBeliefRequest(key=fact(0).fact.key), timeout=RPC_TIMEOUT)
        assert belief.object == fact(0).fact.object
        page = facts.ListBeliefs(
            pb.ListBeliefsRequest(namespace=NS, page_size=10), timeout=RPC_TIMEOUT
        )
        assert len(page.beliefs) == 10

        # Space freed: writes succeed again. The disk grows too: on 16 MiB the log (cut back
        # only past 64 MiB) could fill what the ballast left before the writes below end.
        ballast.unlink()
        grow(small_disk)
        deadline = time.monotonic() + RECOVER_SECONDS
        k = n + 100
        while True:
            try:
                facts.SubmitFact(fact(k), timeout=RPC_TIMEOUT)
                acknowledged.append(k)
                break
            except grpc.RpcError as err:
                assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, err
                assert time.monotonic() < deadline, "writes did not recover after space was freed"
                time.sleep(0.1)
        for j in range(k + 1, k + 50):
            facts.SubmitFact(fact(j), timeout=RPC_TIMEOUT)
            acknowledged.append(j)
        channel.close()
    finally:
        node.kill()

    again = start_server(tmp_path, data_dir=data_dir)
    try:
        channel = open_channel(again.address)
        facts = pb_grpc.FactServiceStub(channel)
        for i in acknowledged:
            belief = facts.GetBelief(pb.GetBeliefRequest(key=fact(i).fact.key), timeout=RPC_TIMEOUT)
            assert belief.object == fact(i).fact.object, f"acknowledged fact {i} was lost"
        channel.close()
    finally:
        code = again.stop()
    assert code == 0, again.output()
