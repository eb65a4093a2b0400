# One image for all four services and the CLI. Kubernetes picks the process:
#   python -m episodic.services.<ingest|scheduler|summariser|recall>
#   episodic migrate
# and `docker run` alone runs `episodic up` (all four; with EXTRAS=embedded, over the
# embedded PostgreSQL in the /data volume). Build (see README, "Deploying: the image"):
#   make image                      base from Debian's packages, then this file, with podman
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm -t episodic:0.1.0 .
# Build arguments:
#   PYTHON_IMAGE  a Python 3.11+ image (Debian based); `make image` builds one with
#                 mmdebstrap (containers/base.sh), so no registry is needed at all.
#   EXTRAS        extras beyond `server`, space-separated: embedded (PostgreSQL in the
#                 image, for `episodic up` without a database), multilingual (nothing more:
#                 the server has the e5 model of datasets in other languages),
#                 mcp. Each has a lock file, requirements/image-<extra>.txt.
#   VERSION, REVISION, CREATED, SOURCE   OCI labels (make image fills them from git).
# No `# syntax=` line: the builder's built-in frontend is enough, and fetching one needs a
# registry.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: pinned dependencies into /opt/venv, the project into /opt/app ----------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1
# pip and setuptools live in /opt/tools and stay in this stage: the venv the runtime gets
# (/opt/venv) never has them. pip comes from the lock too (the base may have none).
COPY requirements/build.txt containers/bootstrap_pip.py /tmp/build/
RUN python /tmp/build/bootstrap_pip.py /tmp/build/build.txt /opt/tools \
    && python -m venv --without-pip /opt/venv
# The dependencies, in a layer of their own: only a change to a lock file rebuilds it, never
# a change to the source. Hashes required, wheels only (no compiler), --no-deps: the lock
# lists everything, and leaves out what serving never uses. The packages' own test suites
# (numpy's, onnx's backend test data: ~40 MB) never run here either.
COPY requirements/image-*.txt /tmp/build/
RUN /opt/tools/bin/pip --python /opt/venv/bin/python install --quiet --require-hashes \
        --no-deps --only-binary :all: -r /tmp/build/image-server.txt \
    && site=$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
    && printf '/opt/extras\n/opt/app\n' > "$site/episodic.pth" \
    && find "$site" -mindepth 2 -depth -type d -name tests -exec rm -rf {} + \
    && rm -rf "$site/onnx/backend/test"
# The extras' packages beside it in /opt/extras (found through the .pth above), so every
# variant shares the large /opt/venv layer and adds only its own.
ARG EXTRAS=""
RUN mkdir /opt/extras && set -eu; set --; \
    for extra in $EXTRAS; do set -- "$@" -r "/tmp/build/image-$extra.txt"; done; \
    if [ $# -gt 0 ]; then \
        /opt/tools/bin/pip --python /opt/venv/bin/python install --quiet --require-hashes \
            --no-deps --only-binary :all: --target /opt/extras "$@"; \
    fi
# The project: its wheel, unpacked into /opt/app (found through the .pth), so the
# runtime copies it as a layer of its own, a few MB that change with every commit. Byte-
# compiled here: the root filesystem is read-only at run time.
COPY pyproject.toml README.md /src/
COPY shared/episodic /src/shared/episodic
COPY services /src/services
# The tools above the services (pyproject.toml's package-dir): the CLI the container runs
# (`episodic up`, `episodic migrate`), replay and devtools.
COPY tools /src/tools
COPY containers/healthcheck.py containers/wait_for_schema.py /src/containers/
RUN cd /src \
    && /opt/tools/bin/pip wheel --quiet --no-deps --no-build-isolation -w /tmp/wheel . \
    && /opt/tools/bin/pip --python /opt/venv/bin/python install --quiet --no-deps \
        --no-compile --target /opt/app /tmp/wheel/*.whl \
    && cp containers/healthcheck.py /opt/app/episodic_healthcheck.py \
    && cp containers/wait_for_schema.py /opt/app/episodic_wait_for_schema.py \
    && /opt/venv/bin/python -m compileall -q -j 0 /opt/app

# ---- runtime -----------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
# Same uid/gid as runAsUser/runAsGroup in k8s/base. /data: `episodic up`'s data directory
# (embedded database, logs, keyring), the one place written besides /tmp. A base that
# brings pip (the official Python images) loses it here: nothing at run time installs.
RUN groupadd --system --gid 10001 episodic \
    && useradd --system --uid 10001 --gid episodic --no-create-home \
       --home-dir /tmp --shell /usr/sbin/nologin episodic \
    && mkdir -m 0750 /data && chown 10001:10001 /data \
    && if python -m pip --version >/dev/null 2>&1; then \
           python -m pip uninstall --quiet --yes pip setuptools wheel; \
       fi
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/extras /opt/extras
COPY --from=build /opt/app /opt/app
ENV PATH=/opt/app/bin:/opt/extras/bin:/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    EPISODIC_DATA_DIR=/data \
    EPISODIC_BIND_HOST="[::]"
# A volume, so `episodic up` also works with a read-only root filesystem (docker run
# --read-only / readOnlyRootFilesystem); Kubernetes mounts an emptyDir or a claim here.
VOLUME /data
WORKDIR /data
USER 10001:10001
EXPOSE 50051 50052 50053 50054 9464
# gRPC health of the process PID 1 runs (containers/healthcheck.py). Docker and podman
# (image built with --format docker) use it; Kubernetes uses the manifests' gRPC probes.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-m", "episodic_healthcheck"]
# Python is PID 1: the services install their own SIGTERM handler (health NOT_SERVING,
# then a graceful stop), and start no child processes that would need reaping (`episodic
# up` stops and waits for its own). Listening beyond loopback needs EPISODIC_AUTH: required
# (API keys) or disabled (open, on purpose); see the README.
CMD ["episodic", "up"]

# Last, so a new commit changes only the labels, not a cached layer above.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=""
ARG EXTRAS=""
LABEL org.opencontainers.image.title="episodic" \
      org.opencontainers.image.description="Episodic memory for AI agents: four gRPC services over PostgreSQL with pgvector" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      dev.episodic.extras="server ${EXTRAS}"
