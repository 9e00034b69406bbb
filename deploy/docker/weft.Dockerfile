# syntax=docker/dockerfile:1
# Weft, the coordinator: REST + WebSocket on port 8080, no state of its own
# (everything lives in NATS JetStream), so any number of replicas can run.
#
# Build from the repository root:
#   docker build -f deploy/docker/weft.Dockerfile -t loom/weft:0.1.0 .
# The base is pinned to an exact tag; pin it by digest in your registry mirror
# with --build-arg PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:<digest>.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# ---- build: a self-contained virtualenv with Loom and its pinned nats-server
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/loom
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY warp ./warp
COPY weft ./weft
COPY shuttle ./shuttle
COPY pattern ./pattern
RUN /opt/loom/bin/pip install --no-cache-dir .

# ---- runtime: the virtualenv and an unprivileged user, nothing else
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="loom-weft" \
      org.opencontainers.image.description="Loom Weft coordinator (REST, WebSocket, routing, spin-up)" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 loom \
 && useradd --system --uid 10001 --gid loom --home-dir /home/loom --create-home \
    --shell /usr/sbin/nologin loom
COPY --from=build /opt/loom /opt/loom
COPY deploy/docker/healthcheck.py /opt/loom/healthcheck.py
ENV PATH=/opt/loom/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    WEFT_HOST=0.0.0.0 \
    WEFT_PORT=8080 \
    LOOM_DATA_DIR=/home/loom/data
USER 10001:10001
WORKDIR /home/loom
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "/opt/loom/healthcheck.py", "http"]
ENTRYPOINT ["weft"]
CMD ["serve"]
