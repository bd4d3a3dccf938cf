# The durable-plan worker image (see docker-compose.yml). The Temporal server runs in its own
# container, so the `server` extra (the dev-server binaries) is not installed here. Pinned like
# the compose file's images: the Python this project is tested on (3.11), an exact release.
FROM python:3.11.13-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so editing the application does not reinstall them.
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install .

COPY . .
RUN useradd --create-home --uid 10001 app && chown -R app /app
USER app

CMD ["python", "worker.py"]
