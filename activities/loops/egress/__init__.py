"""Egress by allowlist for sandboxed commands: the entries' rule (`allowlist`), the worker-side
HTTP and SOCKS5 proxies (`proxy`, `socks`) with their record (`ledger`), the forwarder that runs
inside the sandbox (`bridge`) and one command's session of all of it (`session`)."""
