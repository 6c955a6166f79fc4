"""Model calls: LiteLLM with fallbacks and streaming, prompt building, budget holds, model health.

The offline stand-in is `activities.offline`; the provider layer is `activities.providers`.
"""
