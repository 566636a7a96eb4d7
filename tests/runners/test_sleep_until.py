"""A held answer never leaves before its instant, on the event loop the
server runs (uvloop: whole-millisecond timers that can wake early)."""

import datetime as dt

import uvloop
from django.utils import timezone

from dispatch.polls import sleep_until


def test_sleep_until_never_returns_before_the_instant():
    async def early_wakes():
        early = 0
        for i in range(300):
            # Sub-millisecond remainders are where uvloop's timers round early.
            instant = timezone.now() + dt.timedelta(microseconds=200 + (i * 37) % 3000)
            await sleep_until(instant)
            early += timezone.now() < instant
        return early

    assert uvloop.run(early_wakes()) == 0


def test_sleep_until_none_returns_at_once():
    assert uvloop.run(sleep_until(None)) is None
