"""Offline checks for everything under deploy/: Dockerfiles (hadolint), the
agent workflow (actionlint), shell scripts (shellcheck), Kubernetes manifests
(schema, security and cross-reference checks on the rendered overlays), NATS
configuration (``nats-server -t``) and the compose file.

Each check takes a path and returns a list of :class:`Finding`; an empty list
means the file passed. ``python -m deploy.checks`` runs them all on the repo.
"""

from deploy.checks.common import Finding, ToolMissingError

__all__ = ["Finding", "ToolMissingError"]
