"""A relay that stalls: a TCP proxy in front of a real relay that passes every request
through, except that it never answers a request for one group's record
(GET /v1/groups/<32 hex digits>), holding the connection open instead.

The relay's answers are signed end to end, so the proxy needs no key: it only withholds.
Usage: stalling_proxy.py UPSTREAM_PORT; prints "listening on PORT" once it listens.
"""
import asyncio
import re
import sys

RECORD = re.compile(rb"^GET /v1/groups/[0-9a-f]{32} HTTP/1\.1\r\n", re.M)


async def pipe(reader, writer, connection, watch):
    """Copies reader to writer until either side ends; `connection["held"]` once a record
    was asked for on it: from then on nothing passes and the client's side stays open
    (whatever the relay does with its own side, such as closing it when idle)."""
    try:
        while data := await reader.read(65536):
            if watch and RECORD.search(data):
                connection["held"] = True
            if connection["held"]:
                break
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    if connection["held"]:
        await asyncio.Event().wait()
    writer.close()


async def serve(client_reader, client_writer, upstream_port):
    relay_reader, relay_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    connection = {"held": False}
    await asyncio.gather(pipe(client_reader, relay_writer, connection, True),
                         pipe(relay_reader, client_writer, connection, False))


async def main():
    upstream = int(sys.argv[1])
    server = await asyncio.start_server(lambda r, w: serve(r, w, upstream), "127.0.0.1", 0)
    print("listening on", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
