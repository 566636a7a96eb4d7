"""`/favicon.ico`: browsers ask for it at the site's root whatever a page
links (a JSON answer or /metrics opened in a tab, a page from before the
icon was linked), and a 404 there is noise in every log and console. The
pages link `static/croniq/favicon.svg` (templates/base.html,
templates/admin/base_site.html); this is the same clock as an ICO."""

import functools
from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

ICON = Path(__file__).resolve().parent / "static" / "croniq" / "favicon.ico"
# A day: the icon changes with a release, if ever.
CACHE_CONTROL = "public, max-age=86400"


@functools.cache
def icon() -> bytes:
    return ICON.read_bytes()


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    answer = HttpResponse(icon(), content_type="image/x-icon")
    answer["Cache-Control"] = CACHE_CONTROL
    return answer
