"""Deployment assets (images, Kubernetes manifests, the GitHub Actions agent
workflow) and the Python that checks and runs them.

Not part of the installed distribution: ``deploy.checks`` runs from a checkout
(``make lint-deploy``) and ``deploy.runner`` is copied into the agent image.
"""
