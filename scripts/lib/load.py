#!/usr/bin/env python3
"""Hostile load against one `vault serve` on loopback (Docs/SECURITY.md, "Load and hostile peers").

    load.py --port PORT --pid PID [--seconds S] [--keystore FILE --secret HEX --requester I --holder J]

It sends only to 127.0.0.1, and every loop stops when the time is up. At once, it keeps:

  * 500 idle connections that send nothing (reopened a second after the server drops one);
  * 200 slow handshakes: a valid first Noise message, one byte per second;
  * 20 connections sending random bytes;
  * 20 sending oversized frames: a 65535-byte length prefix, with the frame whole or
    stalled after 1000 bytes;
  * 20 loops of complete handshakes from fresh untrusted keys;
  * 4 loops, under the trusted key of KEYSTORE (an identity stored without passphrase), of
    piece requests for SECRET with bad proofs, and of message headers whose length no
    message may have.

It samples the server's resident memory and descriptors from /proc/PID every 100 ms. When
the time is up it closes everything, waits up to 20 s for the server's descriptor count to
come back to where it started, and prints one JSON object on stdout.

The Noise and message formats come from Docs/PROTOCOL.md, through the noiseprotocol package,
not vault's code.
"""
import argparse
import asyncio
import json
import os
import resource
import sqlite3
import struct
import time

from noise.connection import Keypair, NoiseConnection

HOST = "127.0.0.1"  # Never anywhere else.


class Tally:
    def __init__(self):
        self.counts = {}

    def add(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n


def server_state(pid):
    """(resident KiB, peak resident KiB, open descriptors) of the server, or None once it is gone."""
    try:
        fields = {}
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0]), fds
    except (FileNotFoundError, ProcessLookupError, KeyError):
        return None


async def open_connection(port):
    return await asyncio.wait_for(asyncio.open_connection(HOST, port), 5)


async def closed_by_server(reader, deadline):
    """Waits until the server closes the connection (True) or the time is up (False)."""
    try:
        while True:
            data = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - time.monotonic()))
            if not data:
                return True
    except asyncio.TimeoutError:
        return False
    except ConnectionError:
        return True


def close(writer):
    try:
        writer.close()
    except Exception:
        pass


async def reopening(name, port, deadline, tally, behave, pause):
    """Runs `behave` on connection after connection until the time is up."""
    while time.monotonic() < deadline:
        try:
            reader, writer = await open_connection(port)
        except (OSError, asyncio.TimeoutError):
            tally.add(f"{name} connect failed")
            await asyncio.sleep(pause)
            continue
        tally.add(f"{name} connections")
        try:
            if await behave(reader, writer):
                tally.add(f"{name} closed by server")
        except (ConnectionError, asyncio.IncompleteReadError):
            tally.add(f"{name} closed by server")
        finally:
            close(writer)
        await asyncio.sleep(pause)


def first_handshake_frame():
    noise = NoiseConnection.from_name(b"Noise_XX_25519_ChaChaPoly_BLAKE2b")
    noise.set_as_initiator()
    noise.set_keypair_from_private_bytes(Keypair.STATIC, os.urandom(32))
    noise.set_prologue(b"vault/1")
    noise.start_handshake()
    message = noise.write_message()
    return struct.pack(">H", len(message)) + message


async def recv_frame(reader):
    (length,) = struct.unpack(">H", await reader.readexactly(2))
    return await reader.readexactly(length)


async def send_frame(writer, payload):
    writer.write(struct.pack(">H", len(payload)) + payload)
    await writer.drain()


async def handshake(reader, writer, static):
    noise = NoiseConnection.from_name(b"Noise_XX_25519_ChaChaPoly_BLAKE2b")
    noise.set_as_initiator()
    noise.set_keypair_from_private_bytes(Keypair.STATIC, static)
    noise.set_prologue(b"vault/1")
    noise.start_handshake()
    await send_frame(writer, noise.write_message())
    noise.read_message(await recv_frame(reader))
    await send_frame(writer, noise.write_message())
    return noise


async def receive(noise, reader):
    plain = noise.decrypt(await recv_frame(reader))
    return plain[1], plain[10:]


def message(kind, body, length=None):
    return bytes([2, kind]) + struct.pack(">Q", len(body) if length is None else length) + body  # protocol version 2


async def run(args):
    deadline = time.monotonic() + args.seconds
    tally = Tally()
    peak = {"rss_kib": 0, "fds": 0}

    async def idle(reader, writer):
        return await closed_by_server(reader, deadline)

    async def slow(reader, writer):
        for byte in first_handshake_frame():
            writer.write(bytes([byte]))
            await writer.drain()
            if await closed_by_server(reader, min(deadline, time.monotonic() + 1)):
                return True
            if time.monotonic() >= deadline:
                return False
        return await closed_by_server(reader, deadline)

    async def garbage(reader, writer):
        while time.monotonic() < deadline:
            writer.write(os.urandom(int.from_bytes(os.urandom(2), "big") % 4096 + 1))
            await writer.drain()
            if await closed_by_server(reader, min(deadline, time.monotonic() + 0.05)):
                return True
        return False

    async def oversized(reader, writer):
        whole = os.urandom(1)[0] % 2 == 0
        writer.write(b"\xff\xff" + os.urandom(65535 if whole else 1000))
        await writer.drain()
        return await closed_by_server(reader, deadline)

    async def untrusted(reader, writer):
        noise = await handshake(reader, writer, os.urandom(32))
        kind, body = await receive(noise, reader)
        tally.add(f"untrusted answered {kind}/{body[:1].hex()}")
        return await closed_by_server(reader, deadline)

    static = None
    if args.keystore:
        row = sqlite3.connect(args.keystore).execute("SELECT secret FROM identity WHERE secret_format = 0").fetchone()
        static = row[0][:32]

    async def flood(reader, writer):
        noise = await handshake(reader, writer, static)
        kind, _ = await receive(noise, reader)
        if kind != 6:
            tally.add(f"flood not welcomed {kind}")
            return await closed_by_server(reader, deadline)
        if os.urandom(1)[0] % 4 == 0:
            # A header whose length no piece request may have (2^62 bytes).
            await send_frame(writer, noise.encrypt(message(3, b"", length=1 << 62)))
            tally.add("oversized headers sent")
            return await closed_by_server(reader, deadline)
        body = bytes.fromhex(args.secret) + bytes([args.requester, args.holder]) + os.urandom(64)
        await send_frame(writer, noise.encrypt(message(3, body)))
        kind, answer = await receive(noise, reader)
        tally.add(f"piece requests answered {kind}/{answer[:1].hex()}")
        return await closed_by_server(reader, deadline)

    async def monitor():
        while time.monotonic() < deadline:
            state = server_state(args.pid)
            if state is None:
                tally.add("server gone")
                return
            peak["rss_kib"] = max(peak["rss_kib"], state[1])
            peak["fds"] = max(peak["fds"], state[2])
            await asyncio.sleep(0.1)

    baseline = server_state(args.pid)
    if baseline is None:
        raise SystemExit(f"load.py: no process {args.pid}")
    tasks = [monitor()]
    tasks += [reopening("idle", args.port, deadline, tally, idle, 1.0) for _ in range(args.idle)]
    tasks += [reopening("slow", args.port, deadline, tally, slow, 1.0) for _ in range(args.slow)]
    tasks += [reopening("garbage", args.port, deadline, tally, garbage, 0.1) for _ in range(20)]
    tasks += [reopening("oversized", args.port, deadline, tally, oversized, 0.1) for _ in range(20)]
    tasks += [reopening("untrusted", args.port, deadline, tally, untrusted, 0.1) for _ in range(20)]
    if static is not None:
        tasks += [reopening("flood", args.port, deadline, tally, flood, 0.05) for _ in range(4)]
    await asyncio.gather(*tasks)

    # Everything is closed: the server must come back to its starting descriptor count.
    settle = time.monotonic() + 20
    final = server_state(args.pid)
    while final is not None and final[2] > baseline[2] and time.monotonic() < settle:
        await asyncio.sleep(0.2)
        final = server_state(args.pid)
    return {
        "seconds": args.seconds,
        "alive": final is not None,
        "baseline_fds": baseline[2],
        "peak_fds": peak["fds"],
        "final_fds": final[2] if final else None,
        "peak_rss_kib": max(peak["rss_kib"], final[1] if final else 0),
        "baseline_rss_kib": baseline[0],
        "counts": dict(sorted(tally.counts.items())),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--keystore")
    parser.add_argument("--secret")
    parser.add_argument("--requester", type=int, default=0)
    parser.add_argument("--holder", type=int, default=0)
    args = parser.parse_args()
    if args.seconds > 600:
        parser.error("--seconds is at most 600")
    # One descriptor per connection, and there are over 760 at once.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), max(hard, 4096)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
