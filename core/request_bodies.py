"""Reading a request's body at the ASGI level, with a cap.

Django's handler spools a whole body to a temporary file before any view
runs, with no limit of its own. The endpoints that need no key (pings,
job webhooks) are anyone's to send a body to: they keep its first bytes
and drop the rest as it comes.
"""

import io
from typing import Any

from django.core.exceptions import RequestAborted


async def read_capped_body(receive: Any, limit: int) -> io.BytesIO:
    """The first `limit` bytes of the request's body, in memory; the rest is
    read (the client may send it whole) and dropped. RequestAborted when the
    client hangs up first."""
    kept = io.BytesIO()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestAborted()
        room = limit - kept.tell()
        if room > 0:
            kept.write(message.get("body", b"")[:room])
        if not message.get("more_body", False):
            break
    kept.seek(0)
    return kept
