"""Tool handlers, one module per family; each registers its handlers with `registry.handler`."""
