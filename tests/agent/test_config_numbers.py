"""croniq-runner refuses numbers that parse but mean nothing: nan, inf, negatives."""

import pytest

from croniq_runner.config import UsageError, parse_args

BASE = ["--server", "http://croniq.test", "--token", "t"]


@pytest.mark.parametrize(
    "variable", ["CRONIQ_DRAIN_TIMEOUT", "CRONIQ_KILL_GRACE", "CRONIQ_POLL_WAIT"]
)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "-1"])
def test_nan_inf_and_negative_environment_numbers_are_refused(variable, value):
    with pytest.raises(UsageError, match=variable):
        parse_args(BASE, environ={variable: value})


@pytest.mark.parametrize("flag", ["--drain-timeout", "--kill-grace", "--poll-wait"])
def test_nan_flags_are_refused_too(flag):
    with pytest.raises(UsageError, match=f"{flag}: expected a finite number"):
        parse_args([*BASE, flag, "nan"], environ={})
