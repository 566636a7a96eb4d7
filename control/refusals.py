"""How a refused operation is answered (docs/design.md §8): bad input 422 naming
the field, a full queue 429 with Retry-After, any other refusal 409; always
`{"detail": ...}`, and nothing changed."""

from django.http import JsonResponse

from scheduler.firing.triggers import QueueFull
from scheduler.runs.refusals import OperationRefused


def response(refusal: OperationRefused) -> JsonResponse:
    if getattr(refusal, "field", None):
        return JsonResponse({"detail": str(refusal)}, status=422)
    if isinstance(refusal, QueueFull):
        answer = JsonResponse({"detail": str(refusal)}, status=429)
        answer["Retry-After"] = str(refusal.retry_after)
        return answer
    return JsonResponse({"detail": str(refusal)}, status=409)
