"""The agent runner: starts an agent CLI wired to the fabric through Warp, for one
work item, and reports a failed run as a work failure (docs/deploy.md)."""
