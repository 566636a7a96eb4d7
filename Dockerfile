FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY croniq_project ./croniq_project
COPY calendars ./calendars
COPY scheduler ./scheduler
COPY runners ./runners
COPY audit ./audit
COPY dashboard ./dashboard
COPY templates ./templates
COPY deploy ./deploy
COPY manage.py ./
ENV STATIC_ROOT=/app/staticfiles
RUN pip install . \
    && SECRET_KEY=build python manage.py collectstatic --no-input \
    && useradd --create-home croniq && mkdir -p /data && chown croniq /data
USER croniq
EXPOSE 8000
CMD ["uvicorn", "croniq_project.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
