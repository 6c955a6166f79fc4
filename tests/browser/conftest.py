"""Fixtures of the browser tests: they drive the stack `openloop up` starts."""

from tests.integration.up_env import stack_env  # noqa: F401 - the fixture, for the modules here
