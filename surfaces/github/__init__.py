"""The GitHub surface: webhooks in (`webhooks.register(app)`), payload parsing (`events`)."""
