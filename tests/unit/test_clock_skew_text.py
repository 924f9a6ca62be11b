"""How a clock skew reads in status, the console and a failed round's error."""

from __future__ import annotations

import pytest

from factnode.clock import describe_skew

SECOND = 1_000_000


@pytest.mark.parametrize(
    ("micros", "signed", "text"),
    [
        (1_250_000, True, "1.250s ahead"),
        (-250_000, True, "0.250s behind"),
        (0, True, "0.000s ahead"),
        (300 * SECOND, False, "5m00s"),
        (2 * 3600 * SECOND, True, "2h00m00s ahead"),
        (-(2 * 3600 * SECOND - 3_000), True, "2h00m00s behind"),
        (-2 * 86_400 * SECOND, True, "2d00h00m behind"),
    ],
)
def test_a_skew_reads_in_the_largest_units_it_needs(micros: int, signed: bool, text: str) -> None:
    """Seconds with milliseconds under a minute, then m/s, h/m/s and d/h/m, rounded to the
    second, with ahead or behind when signed."""
    assert describe_skew(micros, signed=signed) == text
