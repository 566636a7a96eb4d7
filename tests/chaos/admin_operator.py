"""An operator editing a job in the admin while the scheduler fires it.

    python -m tests.chaos.admin_operator JOB HOLD_SECONDS     (DATABASE_URL set)

Goes through the admin's own code path for a change form: the ModelAdmin
loads the job and builds its form, the operator "thinks" for HOLD_SECONDS
(the loops fire the job meanwhile), then the form is validated and saved
with `save_form` and `save_model`, as the admin's change view does. Only the
description changes. Prints what the form saw as changed.
"""

import os
import sys
import time

OPERATOR = "chaos-operator"


def operator_request():
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    users = get_user_model().objects
    user = users.filter(username=OPERATOR).first()
    if user is None:
        user = users.create_superuser(OPERATOR, f"{OPERATOR}@example.com", None)
    request = RequestFactory().post("/admin/scheduler/job/")
    request.user = user
    return request


def form_data(form):
    """The POST data of the change form as the page shows it."""
    data = {}
    for bound in form:
        value = bound.value()
        if value is not None and value is not False:
            data[bound.html_name] = value
            if bound.field.show_hidden_initial:  # the page's hidden "initial-" input
                data[bound.html_initial_name] = value
    return data


def save_description(job_name, hold):
    from django.contrib import admin
    from django.db import transaction

    from scheduler.models import Job

    request = operator_request()
    model_admin = admin.site._registry[Job]
    job = Job.objects.get(name=job_name)
    obj = model_admin.get_object(request, str(job.pk))  # the page is loaded
    form_class = model_admin.get_form(request, obj, change=True)
    data = form_data(form_class(instance=obj))
    time.sleep(hold)  # meanwhile the loops fire the job
    data["description"] = f"edited by an operator at {time.time():.3f}"
    form = form_class(data, request.FILES, instance=obj)
    if not form.is_valid():
        return f"refused: {form.errors.as_text()}"
    with transaction.atomic():  # the admin's change view runs in one
        saved = model_admin.save_form(request, form, change=True)
        model_admin.save_model(request, saved, form, change=True)
    return f"saved; changed {sorted(form.changed_data)}"


def main():
    job_name, hold = sys.argv[1], float(sys.argv[2])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import django

    django.setup()
    print(f"operator {job_name}: {save_description(job_name, hold)}", flush=True)


if __name__ == "__main__":
    main()
