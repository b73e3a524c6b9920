#!/usr/bin/env python3
"""A foreign Noise client for `vault serve`, using the noiseprotocol package (not vault's
code) and Docs/PROTOCOL.md.

    noise_client.py HOST PORT KEYSTORE

KEYSTORE is a vault.sqlite whose identity (stored without a passphrase) gives the static key.
It runs Noise_XX_25519_ChaChaPoly_BLAKE2b with the prologue "vault/1", sends a pieceRequest
for a secret nobody holds, and prints what the server answers: "refused CODE" (or the type).
"""
import socket
import sqlite3
import struct
import sys

from noise.connection import Keypair, NoiseConnection


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data


def send_frame(sock, payload):
    sock.sendall(struct.pack(">H", len(payload)) + payload)


def recv_frame(sock):
    (length,) = struct.unpack(">H", recv_exact(sock, 2))
    return recv_exact(sock, length)


def main(host, port, keystore):
    secret = sqlite3.connect(keystore).execute("SELECT secret FROM identity WHERE secret_format = 0").fetchone()[0][:32]
    noise = NoiseConnection.from_name(b"Noise_XX_25519_ChaChaPoly_BLAKE2b")
    noise.set_as_initiator()
    noise.set_keypair_from_private_bytes(Keypair.STATIC, secret)
    noise.set_prologue(b"vault/1")
    noise.start_handshake()
    sock = socket.create_connection((host, int(port)), timeout=10)
    send_frame(sock, noise.write_message())
    noise.read_message(recv_frame(sock))
    send_frame(sock, noise.write_message())
    assert noise.handshake_finished
    print("handshake", noise.get_handshake_hash().hex(), file=sys.stderr)

    def receive():
        answer = noise.decrypt(recv_frame(sock))
        (length,) = struct.unpack(">Q", answer[2:10])
        assert answer[0] == 2 and length == len(answer) - 10  # protocol version 2 (PROTOCOL.md §2)
        return answer[1], answer[10:]

    # The server speaks first: welcome (6), or refused (5) for an untrusted key.
    kind, body = receive()
    if kind == 6:
        request = bytes(16) + bytes([2, 1]) + bytes(64)
        send_frame(sock, noise.encrypt(bytes([2, 3]) + struct.pack(">Q", len(request)) + request))
        kind, body = receive()
    print(f"refused {body[0]}" if kind == 5 else f"type {kind}")


if __name__ == "__main__":
    main(*sys.argv[1:])
