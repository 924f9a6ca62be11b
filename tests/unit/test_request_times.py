"""Every Timestamp a request carries is checked, wherever it sits: the checker visits only
the fields that can lead to one, and must find what a walk of every set field finds."""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import Message

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import FieldViolation
from factnode.server._requests import _timestamps

TIMESTAMP = "google.protobuf.Timestamp"
MESSAGES = sorted(
    name
    for name in dir(pb)
    if isinstance(getattr(pb, name), type) and issubclass(getattr(pb, name), Message)
)


def every_set_field(msg: Message, path: str, out: list[FieldViolation]) -> None:
    """The reference: every set field, recursively (map entries not entered)."""
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        name = f"{path}{fd.name}"
        items = list(value) if fd.is_repeated else [value]
        for i, item in enumerate(items):
            where = f"{name}[{i}]" if fd.is_repeated else name
            if fd.message_type.full_name == TIMESTAMP:
                wire.instant(item, where, out)
            elif not fd.message_type.GetOptions().map_entry:
                every_set_field(item, f"{where}.", out)


def planted(msg: Message, rnd: random.Random, depth: int = 0) -> Message:
    """`msg` with nested messages set at random and Timestamps in and out of range."""
    for fd in msg.DESCRIPTOR.fields:
        if fd.message_type is None or fd.message_type.GetOptions().map_entry:
            continue
        field = getattr(msg, fd.name)
        if fd.message_type.full_name == TIMESTAMP:
            stamps = [field.add() for _ in range(2)] if fd.is_repeated else [field]
            for ts in stamps if rnd.random() < 0.8 else []:
                ts.seconds = rnd.choice([0, 5, 10**12, -(10**12)])
                ts.nanos = rnd.choice([0, 7])
                ts.SetInParent()
        elif depth < 4 and fd.is_repeated:
            for _ in range(rnd.randint(0, 2)):
                planted(field.add(), rnd, depth + 1)
        elif depth < 4 and rnd.random() < 0.7:
            planted(field, rnd, depth + 1)
            field.SetInParent()
    return msg


@pytest.mark.parametrize("name", MESSAGES)
def test_every_timestamp_is_found_where_it_sits(name: str) -> None:
    rnd = random.Random(name)
    for _ in range(30):
        msg = planted(getattr(pb, name)(), rnd)
        expected: list[FieldViolation] = []
        every_set_field(msg, "", expected)
        found: list[FieldViolation] = []
        _timestamps(msg, "", found)
        assert found == expected


def test_an_out_of_range_time_deep_in_a_request_is_named() -> None:
    request = pb.SubmitFactRequest()
    request.fact.valid_from.seconds = 10**12
    found: list[FieldViolation] = []
    _timestamps(request, "", found)
    assert found == [FieldViolation("fact.valid_from", "is outside 0001-01-01..9999-12-31")]
