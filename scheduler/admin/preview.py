"""The job form's live preview of fire times: a JSON view beside the job
admin's own URLs, and the script that asks it as the operator types.

The view is thin: `scheduler.jobs.previews` reads the form and counts the fire
times. It sits behind the admin's login (anonymous or non-staff: redirected
to the login page) and answers 403 to staff who may not see jobs.
"""

from typing import Any

from django.forms import Media, Script
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, URLResolver, path, reverse
from django.utils import timezone

from scheduler.jobs import previews


class FirePreviewAdmin:
    """Mixin for the job ModelAdmin: `<admin>/scheduler/job/preview/`."""

    def get_urls(self) -> list[URLPattern | URLResolver]:
        opts = self.model._meta
        view = self.admin_site.admin_view(self.fire_preview_view)
        name = f"{opts.app_label}_{opts.model_name}_preview"
        # Before the ModelAdmin's own URLs: "<object id>/" would swallow it.
        return [path("preview/", view, name=name), *super().get_urls()]

    def fire_preview_view(self, request: HttpRequest) -> JsonResponse:
        if not self.has_view_or_change_permission(request):
            return refused()
        try:
            form = previews.read_form(request.GET)
            job = previews.load_draft(form)
            if job.pk and not self.has_view_or_change_permission(request, job):
                return refused()
            answer = previews.preview(job, timezone.now(), more=request.GET.get("more") == "1")
        except previews.PreviewError as e:
            return JsonResponse({"error": str(e)}, status=400)
        return JsonResponse(answer)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        opts = self.model._meta
        url = reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_preview")
        script = Script(
            "scheduler/fire_preview.js",
            **{"data-preview-url": url, "data-job-id": obj.pk if obj else "", "defer": True},
        )
        context["media"] = context["media"] + Media(js=[script])
        return super().render_change_form(request, context, add, change, form_url, obj)


def refused() -> JsonResponse:
    return JsonResponse({"error": "you may not view jobs"}, status=403)
