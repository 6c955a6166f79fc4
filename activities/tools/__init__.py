"""The native tools, one module per family (`*_tools.py`, each declared with
`native.native_tool`), their catalog, and the activities that run a call: `tool_activities`
on the agent's queue, `code_activities` on the queue of the worker holding a workspace."""
