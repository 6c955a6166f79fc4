"""Linear's agent platform: signed agent session webhooks start, steer and decide tasks."""
