"""MCP servers: connecting with the official SDK, listing allowed tools as specs, calling them."""
