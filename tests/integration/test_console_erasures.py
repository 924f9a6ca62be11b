"""The console's erasures pages against a real node served in-process: each erasure with its
coverage, each member's receipt or why it is missing, and a reader refused in words
(issue 45, item 2)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from _console import OPERATOR, READER, InProcessNode, sign_in
from starlette.testclient import TestClient

from factnode.client import Client
from factnode.client._types import ErasureCoverage, Receipt
from factnode.console import ConsoleSettings, create_app
from factnode.console._app import receipt_rows
from factnode.core import MICROS_PER_SECOND
from factnode.core.members import MemberRecord
from factnode.core.receipts import Receipt as SignedReceipt
from factnode.store import StoredMember, Writes

BASE = "http://127.0.0.1"
KEY = ("user:ana", "ana", "lives_in")


def member(node_id: str) -> MemberRecord:
    return MemberRecord(node_id, f"{node_id}.example:7421", b"pem", 1, b"\x01")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessNode]:
    """A node that erased Ana's city; of the other members it knows, n2 and n4 confirmed
    (n4 was revoked since), n3 has sent no receipt and n5 is revoked without one."""
    n = InProcessNode(tmp_path_factory.mktemp("console-erasures"))
    try:
        with n.client() as c:
            c.submit(KEY, "Porto", "user_stated", source="user:ana")
            c.erase("GDPR art. 17 request #4512", key=KEY)
        with n.node.repo.write() as tx:
            [erasure_id] = [e.erasure_id for e in tx.erasures_page(None, 10)]
            now = n.node.ledger.clock.now()
            tx.apply(
                Writes(
                    members=[StoredMember(member("n2"), False), StoredMember(member("n3"), False),
                             StoredMember(member("n4"), True), StoredMember(member("n5"), True)],
                    receipts=[SignedReceipt(erasure_id, "n2", now + MICROS_PER_SECOND, 1, b"s"),
                              SignedReceipt(erasure_id, "n4", now + 2 * MICROS_PER_SECOND, 0, b"s")],
                )
            )  # fmt: skip
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def grpc_client(node: InProcessNode) -> Iterator[Client]:
    with node.client() as c:
        yield c


def _console(address: str, token: str) -> TestClient:
    app = create_app(ConsoleSettings(address, timeout=5))
    return TestClient(app, base_url=BASE, follow_redirects=False, headers={"Origin": BASE})


@pytest.fixture(scope="module")
def operator(node: InProcessNode) -> Iterator[TestClient]:
    with _console(node.address, OPERATOR) as c:
        sign_in(c, BASE, OPERATOR)
        yield c


def test_the_list_shows_each_erasure_with_its_coverage(
    operator: TestClient, grpc_client: Client
) -> None:
    """/erasures lists the erasure with its scope, origin, operator and coverage in words
    ("confirmed by 2 of 3 members; waiting: n3"), and links to its page; the node page
    links to the list."""
    page = operator.get("/erasures")
    assert page.status_code == 200, page.text
    [row] = re.findall(r'<tr class="erasure".*?</tr>', page.text, re.S)
    [erasure] = grpc_client.erasures().items
    for shown in (erasure.erasure_id, "key", "console-node", "olga", "waiting",
                  "confirmed by 2 of 3 members; waiting: n3; revoked: n4, n5"):  # fmt: skip
        assert shown in row
    assert f'href="/erasures/{erasure.erasure_id}"' in row
    assert '<a href="/erasures">Erasures</a>' in operator.get("/node").text


def test_an_erasures_page_gives_each_members_receipt_or_why_it_is_missing(
    operator: TestClient, grpc_client: Client
) -> None:
    """/erasures/ID shows the reason and coverage, and a row per member: confirmed with when
    and how much it removed, waiting (never heard from), revoked since (its receipt kept,
    not counted), revoked (not waited for)."""
    [erasure] = grpc_client.erasures().items
    page = operator.get(f"/erasures/{erasure.erasure_id}")
    assert page.status_code == 200, page.text
    assert "GDPR art. 17 request #4512" in page.text
    assert erasure.summary in page.text
    rows = {
        node: re.sub(r"<[^>]+>|\s+", " ", row)
        for node, row in re.findall(r'data-node="([^"]+)">(.*?)</tr>', page.text, re.S)
    }
    assert list(rows) == ["console-node", "n2", "n4", "n3", "n5"]
    assert "confirmed" in rows["console-node"] and " 1 " in rows["console-node"]
    assert "confirmed" in rows["n2"]
    assert "waiting" in rows["n3"] and "never heard from" in rows["n3"]
    assert "revoked since: its receipt is kept, not counted" in rows["n4"]
    assert "revoked: not waited for" in rows["n5"]


def test_unknown_and_malformed_erasure_ids_are_refused_in_words(operator: TestClient) -> None:
    """An id the node holds no erasure for is the node's NOT_FOUND (404); a malformed one its
    INVALID_ARGUMENT (400); neither shows a traceback."""
    unknown = operator.get("/erasures/" + "0" * 32)
    assert unknown.status_code == 404 and "NOT_FOUND" in unknown.text
    malformed = operator.get("/erasures/not-an-id")
    assert malformed.status_code == 400 and "INVALID_ARGUMENT" in malformed.text
    for page in (unknown, malformed):
        assert "Traceback" not in page.text


def test_a_reader_gets_the_nodes_permission_denied(node: InProcessNode) -> None:
    """A reader's token is refused by the node (ListErasures and GetErasure are operators'
    calls): the page says PERMISSION_DENIED and that erasures need the operator role."""
    with _console(node.address, READER) as reader:
        sign_in(reader, BASE, READER)
        for path in ("/erasures", "/erasures/" + "0" * 32):
            refused = reader.get(path)
            assert refused.status_code == 403
            assert "PERMISSION_DENIED" in refused.text
            assert "the erasures need the <code>operator</code> role" in refused.text


def test_a_page_of_erasures_leads_to_the_next(operator: TestClient, grpc_client: Client) -> None:
    """With more erasures than a page holds, the page links to the next, which shows the rest."""
    grpc_client.erase("second request", key=("user:rui", "rui", "lives_in"))
    first = operator.get("/erasures", params={"page_size": "1"})
    assert first.text.count('<tr class="erasure"') == 1
    [next_url] = re.findall(r'class="next" href="([^"]+)"', first.text)
    second = operator.get(next_url.replace("&amp;", "&"))
    assert second.text.count('<tr class="erasure"') == 1
    newest, older = (e.erasure_id for e in grpc_client.erasures().items)
    assert newest in first.text and older in second.text and newest not in second.text


def test_a_waiting_member_is_said_to_be_heard_from_or_not_since_the_erasure() -> None:
    """Why a member is waited for: never heard from, not heard from since the erasure (with
    when it last was), or heard from since with its receipt not here yet."""
    at = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
    e = ErasureCoverage(
        "a" * 32, "key", at, "olga", "why", "n1", (Receipt("n1", at, 1),),
        ("n2", "n3", "n4"), (), False, "confirmed by 1 of 4 members; waiting: n2, n3, n4",
    )  # fmt: skip
    heard = {"n3": at - timedelta(hours=1), "n4": at + timedelta(minutes=5)}
    why = {r["node"]: r["why"] for r in receipt_rows(e, heard)}
    assert why == {
        "n1": "",
        "n2": "never heard from",
        "n3": "not heard from since the erasure (last heard 2026-12-06 09:00:00Z)",
        "n4": "heard from at 2026-12-06 10:05:00Z; its receipt has not reached this node yet",
    }
