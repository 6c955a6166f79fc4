"""Playbook I/O: starting runs for an event, and the run workflow's activities."""
