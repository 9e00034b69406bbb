#!/usr/bin/env bash
# Entry point of the Loom agent workflow (agent.yml), usable anywhere Loom is
# installed: runs deploy/runner from this checkout. All the logic lives there;
# `run-agent.sh --help` lists the commands, docs/deploy.md the variables.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${LOOM_PYTHON:-python3}"
export PYTHONPATH="${repo}${PYTHONPATH:+:${PYTHONPATH}}"
exec "${python}" -m deploy.runner "$@"
