"""GitHub: the PyGithub client, exactly-once writes, and what a task shows on GitHub."""
