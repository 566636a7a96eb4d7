# The server image: web (uvicorn) and scheduler_loop. Runners use the slim
# image of Dockerfile.runner.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# Dependencies first, in their own layer: a change to Croniq's code does not
# download them again.
COPY pyproject.toml ./
RUN python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"], sep="\n")' > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt
COPY README.md manage.py ./
COPY croniq_project ./croniq_project
COPY calendars ./calendars
COPY scheduler ./scheduler
COPY runners ./runners
COPY audit ./audit
COPY notifications ./notifications
COPY control ./control
COPY dashboard ./dashboard
COPY templates ./templates
COPY deploy ./deploy
ENV STATIC_ROOT=/app/staticfiles
# uid 1000 as in the runner image: both mount the runner token's volume.
# The processes import Croniq from /app, which uid 1000 cannot write:
# its bytecode is compiled here, or every start would compile it anew.
RUN pip install --no-deps . \
    && SECRET_KEY=build python manage.py collectstatic --no-input \
    && python -m compileall -q . \
    && useradd --uid 1000 --create-home croniq \
    && mkdir -p /data /run/croniq && chown croniq /data /run/croniq
USER croniq
EXPOSE 8000
CMD ["uvicorn", "croniq_project.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
