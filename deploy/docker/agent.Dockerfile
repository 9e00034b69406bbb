# syntax=docker/dockerfile:1
# Agent image: Warp (the per-agent MCP server), the agent runner that the
# kubernetes and github-actions spin-up mechanisms start, and a place for the
# agent CLI itself (/opt/agent/bin is on PATH).
#
# Build from the repository root:
#   docker build -f deploy/docker/agent.Dockerfile -t loom/agent:0.1.0 .
# Add an agent CLI in a derived image, e.g.
#   FROM loom/agent:0.1.0
#   USER root
#   RUN <install your agent CLI into /opt/agent>
#   USER 10001:10001
#   ENV AGENT_COMMAND="claude -p --mcp-config {mcp_config} {prompt}"
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# ---- build: a self-contained virtualenv with Loom (warp, pattern, ...)
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

# ---- runtime
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="loom-agent" \
      org.opencontainers.image.description="Loom agent runner: Warp MCP server plus a slot for an agent CLI" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 loom \
 && useradd --system --uid 10001 --gid loom --home-dir /home/loom --create-home \
    --shell /bin/bash loom \
 && mkdir -p /opt/agent/bin /workspace \
 && chown loom:loom /workspace
COPY --from=build /opt/loom /opt/loom
COPY deploy/__init__.py /opt/loom/app/deploy/__init__.py
COPY deploy/runner /opt/loom/app/deploy/runner
COPY deploy/docker/healthcheck.py /opt/loom/healthcheck.py
ENV PATH=/opt/agent/bin:/opt/loom/bin:$PATH \
    PYTHONPATH=/opt/loom/app \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LOOM_PROJECT_PATH=/workspace
USER 10001:10001
WORKDIR /workspace
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/opt/loom/healthcheck.py", "agent"]
ENTRYPOINT ["python", "-m", "deploy.runner"]
