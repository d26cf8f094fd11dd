"""Numbers in messages read apart from the limit they missed (``pcreg._text``)."""

from __future__ import annotations

import math

from pcreg._text import apart, size_text, sizes_apart


def test_a_value_and_its_limit_get_the_decimals_that_part_them():
    assert apart(0.5, 0.3) == ("0.50", "0.30")  # apart already: the asked decimals
    assert apart(0.2999, 0.3) == ("0.2999", "0.3000")  # read "0.30 < 0.30" before
    assert apart(0.346, 0.35) == ("0.346", "0.350")
    assert apart(0.029, 0.03, 0, percent=True) == ("2.9%", "3.0%")  # "3% ... at least 3%"
    assert apart(0.3 - 1e-12, 0.3) == (repr(0.3 - 1e-12), "0.3")  # past 6 decimals: repr
    assert apart(0.3, 0.3) == ("0.30", "0.30") and apart(math.nan, 0.3) == ("nan", "0.30")


def test_a_size_and_its_cap_read_apart_in_one_unit():
    mib, gib = 2**20, 2**30
    assert sizes_apart(3.02 * mib, 3 * mib) == ("3.02 MiB", "3.00 MiB")
    assert sizes_apart(5 * gib, 3 * mib) == ("5.0 GiB", "3.0 MiB")  # far apart: own units
    assert sizes_apart(1.4 * gib, 1000 * mib) == ("1.4 GiB", "1.0 GiB")  # close: one unit
    # either side of a unit's boundary: "1.0 GiB" against "1024.0 MiB" read alike
    assert sizes_apart(gib + 10, gib - 10) == (f"{gib + 10} bytes", f"{gib - 10} bytes")
    assert sizes_apart(mib + 5, mib - 5) == (f"{mib + 5} bytes", f"{mib - 5} bytes")
    assert sizes_apart(20000, 19000) == ("19.5 KiB", "18.6 KiB")
    # from a hostile run: a need a fraction of a byte over its cap read as the cap itself,
    # and a cap a byte under 1 MiB as "1024.0 KiB"
    assert sizes_apart(478986371.4, 478986371) == ("478986372 bytes", "478986371 bytes")
    assert sizes_apart(5.6 * mib, mib - 1) == ("5.6 MiB", "1.0 MiB")
    assert sizes_apart(2.5 * gib, gib - 1) == ("2.5 GiB", "1.0 GiB")


def test_a_size_alone_in_its_own_unit():
    assert size_text(512) == "0.5 KiB" and size_text(3 * 2**20) == "3.0 MiB"
    assert size_text(2**20 - 1) == "1.0 MiB" and size_text(2**30 - 1) == "1.0 GiB"
    assert size_text(5.5 * 2**30) == "5.5 GiB"
