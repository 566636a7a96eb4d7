"""Sizes as a job's limits write them (croniq_runner.sizes, docs/design.md
§15): read the same by the server and the agent, written back as people
write them, refused with the value quoted and the right unit named."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croniq_runner.sizes import GIB, KIB, MIB, TIB, SizeError, parse_size, shown, written


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64MiB", 64 * MIB),
        ("16KiB", 16 * KIB),
        ("1GiB", GIB),
        ("2TiB", 2 * TIB),
        ("64 MiB", 64 * MIB),
        (" 64mib ", 64 * MIB),
        ("512B", 512),
        ("1048576", MIB),
        ("0", 0),
        (4096, 4096),
        (0, 0),
    ],
)
def test_a_size_is_bytes_or_a_number_of_binary_units(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("64MB", "'64MB' is not a size: units are binary, write 64MiB (64 x 1048576 bytes)"),
        ("1G", "'1G' is not a size: units are binary, write 1GiB (1 x 1073741824 bytes)"),
        ("16k", "'16k' is not a size: units are binary, write 16KiB (16 x 1024 bytes)"),
        ("1.5GiB", "'1.5GiB' is not a size: a whole number of bytes, or one followed by KiB, "
         "MiB or GiB (64MiB)"),
        ("MiB", "'MiB' is not a size: a whole number of bytes, or one followed by KiB, MiB or "
         "GiB (64MiB)"),
        ("64 furlongs", "'64 furlongs' is not a size: a whole number of bytes, or one followed "
         "by KiB, MiB or GiB (64MiB)"),
        ("", "'' is not a size: a whole number of bytes, or one followed by KiB, MiB or GiB "
         "(64MiB)"),
        ("-1MiB", "'-1MiB' is not a size: a whole number of bytes, or one followed by KiB, MiB "
         "or GiB (64MiB)"),
        (-5, "-5 is not a size: it is below zero"),
        (True, "True is not a size: a whole number of bytes, or one followed by KiB, MiB or "
         "GiB (64MiB)"),
        (1.5, "1.5 is not a size: a whole number of bytes, or one followed by KiB, MiB or GiB "
         "(64MiB)"),
        (None, "None is not a size: a whole number of bytes, or one followed by KiB, MiB or "
         "GiB (64MiB)"),
        ([64], "[64] is not a size: a whole number of bytes, or one followed by KiB, MiB or "
         "GiB (64MiB)"),
    ],
)  # fmt: skip
def test_anything_else_is_refused_saying_what_a_size_is(value, why):
    with pytest.raises(SizeError) as refused:
        parse_size(value)
    assert str(refused.value) == why


def test_a_huge_text_is_refused_quoted_short_not_read_as_a_number():
    # Python refuses int() of more than 4,300 digits with its own error.
    with pytest.raises(SizeError) as refused:
        parse_size("9" * 100_000)
    assert str(refused.value).startswith("'99999")
    assert len(str(refused.value)) < 200


def test_a_size_is_written_in_the_largest_unit_that_divides_it():
    assert written(64 * MIB) == "64MiB"
    assert written(1536 * KIB) == "1536KiB"
    assert written(GIB) == "1GiB"
    assert written(1000) == 1000  # no unit divides it: the bytes
    assert written(0) == 0


def test_a_size_is_shown_exactly():
    assert shown(64 * MIB) == "64 MiB"
    assert shown(2 * GIB) == "2 GiB"
    assert shown(1000) == "1000 bytes"
    assert shown(1) == "1 byte"


@given(st.integers(min_value=0, max_value=2**50))
def test_what_is_written_reads_back_as_the_same_size(size):
    assert parse_size(written(size)) == size
