"""How the console words a logged decision: by values, not version ids.

The decision log holds ids, never values (an erasure must not leave a value in it), so the
console puts the values back from the keys' histories as it shows a page; a version the
node no longer holds (erased) keeps its id."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from factnode.client import Decision, Version

# A version id as the node writes it into a decision's detail.
VERSION_ID = re.compile(r"\b[0-9a-f]{32}\b")


def version_values(histories: Iterable[Iterable[Version]]) -> dict[str, str]:
    """Each version id of the given histories with its value."""
    return {v.version_id: v.object for history in histories for v in history}


def decision_detail(d: Decision, values: Mapping[str, str]) -> str:
    """The detail column of a logged decision: the value it decided (and the one it
    replaced), then its detail with every version id it names given as that version's
    value; ids without a known value stay as they are."""
    detail = VERSION_ID.sub(lambda m: repr(values[m[0]]) if m[0] in values else m[0], d.detail)
    value = values.get(d.version_id)
    if value is None:
        return detail
    head = repr(value)
    replaced = values.get(d.supersedes)
    if replaced is not None and d.supersedes != d.version_id:
        head += f" (replacing {replaced!r})"
    return f"{head}: {detail}" if detail else head
