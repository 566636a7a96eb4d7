"""The tests' own TOTP against RFC 6238's test vectors (appendix B, SHA-1)."""

import base64

from tests.totp import hotp, totp

RFC_SECRET = base64.b32encode(b"12345678901234567890").decode()


def test_the_rfc_6238_vectors():
    assert totp(RFC_SECRET, 59, digits=8) == "94287082"
    assert totp(RFC_SECRET, 1111111109, digits=8) == "07081804"
    assert totp(RFC_SECRET, 20000000000, digits=8) == "65353130"


def test_a_six_digit_code_is_the_last_six_of_eight():
    assert totp(RFC_SECRET, 59) == "287082"
    assert hotp(b"12345678901234567890", 1) == "287082"
