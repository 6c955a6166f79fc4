"""Egress by allowlist for sandboxed commands: the entries' rule (`allowlist`), the worker-side
HTTP and SOCKS5 proxies (`proxy`, `socks`) on their connections (`endpoint`) with their record
(`ledger`), the bridge that opens the proxy ports inside the sandbox and hands them over
(`bridge`, `handoff`) and one command's session of all of it (`session`)."""
