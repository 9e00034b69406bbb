"""One module per command group; each exposes ``app`` (a sub-command group) or
``register(app)`` (top-level commands)."""
