import logging

from django.db import connection
from django.db.utils import DatabaseError
from django.http import HttpRequest, JsonResponse

log = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database answers a query, 503 otherwise.

    Anyone may call it, so a failure says only "unavailable": the error text
    (host names, users, paths) goes to the log, not to the caller.
    """
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as e:
        log.warning("healthz: database unavailable: %s", e)
        return JsonResponse({"status": "unavailable"}, status=503)
    return JsonResponse({"status": "ok"})
