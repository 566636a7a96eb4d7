# The server image: web (uvicorn) and scheduler_loop. Runners use the slim
# image of Dockerfile.runner.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# Dependencies first, in their own layer: a change to Croniq's code does not
# download them again. The lock pins every version the suite tests and every
# file's hash (`make lock` compiles it from pyproject.toml's ranges).
COPY requirements/server.txt ./requirements/
RUN pip install -r requirements/server.txt
COPY pyproject.toml README.md manage.py ./
COPY croniq_project ./croniq_project
COPY core ./core
COPY calendars ./calendars
COPY scheduler ./scheduler
COPY runners ./runners
COPY dispatch ./dispatch
COPY audit ./audit
COPY notifications ./notifications
COPY checks ./checks
COPY vault ./vault
COPY projects ./projects
COPY control ./control
COPY dashboard ./dashboard
COPY templates ./templates
COPY deploy ./deploy
# The server requires croniq-runner (`import_crontab` reads crontabs with
# its parser): this checkout's, at the same version, its requests from the lock.
COPY runner ./runner
ENV STATIC_ROOT=/app/staticfiles
# uid 1000 as in the runner image: both mount the runner token's volume.
# The processes import Croniq from /app, which uid 1000 cannot write:
# its bytecode is compiled here, or every start would compile it anew.
RUN pip install --no-deps ./runner . \
    && pip check \
    && SECRET_KEY=build python manage.py collectstatic --no-input \
    && python -m compileall -q . \
    && useradd --uid 1000 --create-home croniq \
    && mkdir -p /data /run/croniq && chown croniq /data /run/croniq
USER croniq
EXPOSE 8000
CMD ["uvicorn", "croniq_project.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
