from django.db import connection
from django.db.utils import DatabaseError
from django.http import JsonResponse


def healthz(request):
    """200 when the database answers a query, 503 otherwise."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as e:
        return JsonResponse({"status": "unavailable", "detail": str(e)}, status=503)
    return JsonResponse({"status": "ok"})
