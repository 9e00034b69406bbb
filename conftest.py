"""Root conftest: load the shared real-nats-server fixtures for every test tree."""

pytest_plugins = ["shared.testing"]
