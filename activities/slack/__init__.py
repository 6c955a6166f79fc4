"""Slack: the slack-sdk client, Block Kit builders, and what a task shows in its thread."""
