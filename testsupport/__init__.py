"""Test support shared by ``tests/``, ``test-scenarios/`` and the deploy tests.

Not part of the installed distribution (pyproject's package list leaves it out): it is
imported from the repository root, which the root ``conftest.py`` puts on ``sys.path``.
"""
