"""The README's ten lines that verify a webhook signature work against the
signatures Croniq sends (docs/design.md §9)."""

import re
import time
from pathlib import Path

import pytest

from notifications.channels import sign

README = Path(__file__).resolve().parents[2] / "README.md"
SECRET = "whsec-readme"
BODY = b'{"id": "5f0c3b1e", "event": "execution.given_up", "summary": "billing-sync failed"}'


@pytest.fixture(scope="module")
def signature_ok():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (code,) = [block for block in blocks if "def croniq_signature_ok" in block]
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    namespace = {}
    exec(code, namespace)  # noqa: S102 (our own README)
    return namespace["croniq_signature_ok"]


def test_it_accepts_what_croniq_signs(signature_ok):
    header = sign(SECRET, int(time.time()), BODY)
    assert signature_ok(SECRET.encode(), header, BODY)


def test_it_refuses_a_tampered_body_or_another_secret(signature_ok):
    header = sign(SECRET, int(time.time()), BODY)
    assert not signature_ok(SECRET.encode(), header, BODY.replace(b"failed", b"passed"))
    assert not signature_ok(b"another-secret", header, BODY)


def test_it_refuses_an_old_signature_and_a_malformed_header(signature_ok):
    old = sign(SECRET, int(time.time()) - 3600, BODY)
    assert not signature_ok(SECRET.encode(), old, BODY)
    assert not signature_ok(SECRET.encode(), "garbage", BODY)
    assert not signature_ok(SECRET.encode(), "", BODY)


def test_it_accepts_any_of_several_signatures_while_a_secret_rotates(signature_ok):
    now = int(time.time())
    new = sign(SECRET, now, BODY)
    rotating = f"{new},v1={'0' * 64}"
    assert signature_ok(SECRET.encode(), rotating, BODY)
