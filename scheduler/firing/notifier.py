"""New work for runners: one hint, whoever hands work out.

The scheduler creates executions (a firing, a retry, an operator's run-now)
but knows nothing of who waits for them. An app above it that hands work out
registers a listener when it starts (`RunnersConfig.ready`: wake the waiting
long-polls); `new_work()` calls each. With none registered it does nothing.
"""

from collections.abc import Callable

_listeners = []


def on_new_work(listener: Callable[[], object]) -> None:
    """Call `listener()` whenever new work may be ready for runners (a new or
    retried execution). The listener waits for the commit itself if it
    must. Registering the same listener twice registers it once."""
    if listener not in _listeners:
        _listeners.append(listener)


def new_work() -> None:
    """Tell every registered listener that pending executions were committed."""
    for listener in list(_listeners):
        listener()
