"""The two small programs the egress bench runs: the client, inside the sandbox, and the
server standing in for an outside host, in a process of its own (in the bench's process it
would share the proxies' interpreter)."""

from __future__ import annotations

# argv: mode (direct, forward through the proxy, connect: a CONNECT tunnel), the server's
# port, how many requests, "reuse" (one kept-alive connection) or "new" (one each), the path.
CLIENT = """\
import http.client, sys, time
mode, port, count, reuse, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def connect():
    if mode == "direct":
        return http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection = http.client.HTTPConnection("127.0.0.1", 3128, timeout=30)
    if mode == "connect":
        connection.set_tunnel("127.0.0.1", port)
    return connection
target = f"http://127.0.0.1:{port}{path}" if mode == "forward" else path
started = time.perf_counter()
connection = connect()
for _ in range(count):
    connection.request("GET", target)
    answer = connection.getresponse()
    assert answer.status == 200 and answer.read()
    if reuse != "reuse":
        connection.close()
        connection = connect()
connection.close()
print("elapsed", time.perf_counter() - started)
"""

# Answers `GET /?delay_ms=D&kb=K` after D ms with K kB (3 bytes without), keeping the
# connection open unless the request says `Connection: close`.
ORIGIN = """\
import asyncio
from urllib.parse import parse_qs, urlsplit
async def answer(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\\r\\n\\r\\n")
            query = parse_qs(urlsplit(head.split(b" ")[1].decode()).query)
            delay_ms, kb = int(query.get("delay_ms", ["0"])[0]), int(query.get("kb", ["0"])[0])
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            body = b"x" * (kb * 1024) or b"ok\\n"
            close = b"connection: close" in head.lower()
            extra = b"Connection: close\\r\\n" if close else b""
            writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n%s\\r\\n" % (len(body), extra) + body)
            await writer.drain()
            if close:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()
async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""
