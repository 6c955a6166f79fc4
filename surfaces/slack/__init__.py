"""The Slack surface: Events API and interactivity over HTTP (`events`), Socket Mode
(`cli`: `openloop slack socket`), the shared handling of both (`dispatch`), and the pure
message builders (`blocks`). Handlers only verify, start or signal a task, and acknowledge.
"""
