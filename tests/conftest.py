import pytest


@pytest.fixture(autouse=True)
def no_stray_notifier(monkeypatch):
    """A loop ticked by a test starts no notifier thread (it would outlive
    the test); tests of the notifier start theirs, stopped afterwards."""
    from notifications import notifier

    monkeypatch.setattr(notifier, "AUTOSTART", False)
    yield
    notifier.stop_all()
