"""Root conftest: load the real-nats-server fixtures for every test tree.

Being at the repository root, this file puts the root on ``sys.path``, so the test-only
``testsupport`` package (not installed with the project) is importable from every tree.
"""

pytest_plugins = ["testsupport.servers"]
