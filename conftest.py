"""Root conftest: load the real-nats-server fixtures for every test tree.

Being at the repository root, this file puts the root on ``sys.path``, so the test-only
``testsupport`` package (not installed with the project) is importable from every tree.
"""

pytest_plugins = ["testsupport.servers"]


def pytest_configure(config: object) -> None:
    """In-process parts (Weft apps, work queues) record their work spans the way the real
    processes do (``shared.tracing.configure`` at start), whatever test runs first; never
    exported from here, whatever ``OTEL_*`` the developer's shell has."""
    from shared import tracing

    tracing.configure("loom-weft", env={})
