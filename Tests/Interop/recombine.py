#!/usr/bin/env python3
"""An independent reader of vault share bundles, written from Docs/FORMAT.md alone.

    recombine.py [--password-file F] KEYSTORE BUNDLE [KEYSTORE BUNDLE ...]

Each KEYSTORE is the vault.sqlite of the holder the BUNDLE is sealed to (keys stored without
a passphrase). Given k bundles of one secret, it verifies each one as FORMAT.md §9 says,
recombines the data key (§6), rebuilds the ciphertext (§8), opens it (§7, §10) and writes
the content to stdout. Uses PyNaCl, cryptography (AES-GCM) and hashlib only: no vault code.
"""
import hashlib
import sqlite3
import struct
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl import bindings as nacl

L = 65536
S = L + 16  # §8: a stripe is one sealed chunk of the §7 stream
TAG_FINAL = 3


def blake(key, *parts, size=32):
    return hashlib.blake2b(b"".join(parts), digest_size=size, key=key.encode()).digest()


SHAMIR_FIELD = 0x11B  # §6: Shamir's field, the AES polynomial
DISPERSAL_FIELD = 0x11D  # §8: the dispersal's field, x^8 + x^4 + x^3 + x^2 + 1


def gf_mul(a, b, poly=SHAMIR_FIELD):
    p = 0
    for _ in range(8):
        if b & 1:
            p ^= a
        a = ((a << 1) ^ poly) if a & 0x80 else a << 1
        b >>= 1
    return p


def gf_inv(a, poly=SHAMIR_FIELD):
    r = 1
    for _ in range(254):
        r = gf_mul(r, a, poly)
    return r


def piece_length(c, k):
    return c // S * -(-S // k) + -(-(c % S) // k)


def commitment(piece, k):
    """§9: SHA-256 over the domain and the SHA-256 of each segment (one per stripe)."""
    seg = -(-S // k)
    digests = b"".join(hashlib.sha256(piece[o:o + seg]).digest() for o in range(0, len(piece), seg))
    return hashlib.sha256(b"vault/v2/piece" + digests).digest()


def open_payload(key, data):
    """§7: AES-256-GCM chunks, nonce = 11-byte big-endian counter || last flag, the last
    chunk alone flagged and alone allowed to be short."""
    aead = AESGCM(key)
    out, offset, counter = [], 0, 0
    while True:
        chunk = data[offset:offset + L + 16]
        offset += len(chunk)
        last = offset == len(data)
        if len(chunk) < 16 or (not last and len(chunk) != L + 16):
            raise ValueError("bad payload framing")
        out.append(aead.decrypt(counter.to_bytes(11, "big") + bytes([1 if last else 0]), chunk, None))
        counter += 1
        if last:
            return b"".join(out)


def open_stream(key, data):
    """§7 (password layer): secretstream header, full MESSAGE chunks, one FINAL chunk at the very end."""
    state = nacl.crypto_secretstream_xchacha20poly1305_state()
    nacl.crypto_secretstream_xchacha20poly1305_init_pull(state, data[:24], key)
    out, offset = [], 24
    while offset < len(data):
        chunk = data[offset:offset + L + 17]
        offset += len(chunk)
        plain, tag = nacl.crypto_secretstream_xchacha20poly1305_pull(state, chunk)
        last = offset == len(data)
        if (tag == TAG_FINAL) != last or (not last and len(plain) != L):
            raise ValueError("bad stream framing")
        out.append(plain)
    return b"".join(out)


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise ValueError("truncated")
        self.at += n
        return self.data[self.at - n:self.at]

    def int(self, n):
        return int.from_bytes(self.take(n), "big")


def parse_bundle(data):
    assert data[:4] == b"VLTB" and data[4] == 2, "not a version 2 bundle"
    length = int.from_bytes(data[5:9], "big")
    header = data[9:9 + length]
    signature = data[9 + length:9 + length + 64]
    r = Reader(header)
    h = {"raw": header, "id": r.take(16), "created": r.int(8), "type": r.int(1)}
    h["description"] = r.take(r.int(2)).decode()
    h["k"], h["n"], h["index"] = r.int(1), r.int(1), r.int(1)
    h["clen"] = r.int(8)
    card = r.take(65)
    assert card[0] == 1
    h["dealer_x"], h["dealer_ed"] = card[1:33], card[33:65]
    h["holder_key"] = r.take(32)
    h["sender_key"] = r.take(32)
    h["password"] = r.int(1)
    if r.int(1):
        r.take(16)
    if h["type"] == 5:
        r.take(16)  # key id
    if r.int(1):
        h["labels"] = [r.take(r.int(1)).decode() for _ in range(h["n"])]
    h["commit"], h["pop"], h["tag"] = [], [], []
    for _ in range(h["n"]):
        h["commit"].append(r.take(32))
        h["pop"].append(r.take(32))
        h["tag"].append(r.take(32))
    assert r.at == len(header), "trailing header bytes"
    nacl.crypto_sign_open(signature + b"vault/v2/bundle-header" + header, h["dealer_ed"])
    body = data[9 + length + 64:]
    return h, body


def open_bundle(keystore, path):
    sk = sqlite3.connect(keystore).execute("SELECT secret FROM identity WHERE secret_format = 0").fetchone()[0][:32]
    pk = nacl.crypto_scalarmult_base(sk)
    h, body = parse_bundle(open(path, "rb").read())
    i = h["index"]
    assert h["holder_key"] == pk and h["tag"][i - 1] == blake("vault/v1/holder", h["id"], pk)
    # From the one-time key in the signed header, not from the dealer's own key.
    plain = nacl.crypto_box_open(body[24:104], body[:24], h["sender_key"], sk)
    share, bound = plain[:32], plain[32:64]
    assert bound == blake("vault/v1/bundle", h["raw"]), "box bound to another header"
    piece = body[104:]
    assert len(piece) == piece_length(h["clen"], h["k"]), "wrong bundle length"
    assert commitment(piece, h["k"]) == h["commit"][i - 1], "piece does not match its commitment"
    seed = blake("vault/v1/pop", h["id"], bytes([i]), share, h["commit"][i - 1])
    assert nacl.crypto_sign_seed_keypair(seed)[0] == h["pop"][i - 1], "key share does not match its proof key"
    return h, share, piece


def invert(m, poly):
    size = len(m)
    a = [row[:] + [int(i == j) for j in range(size)] for i, row in enumerate(m)]
    for c in range(size):
        p = next(r for r in range(c, size) if a[r][c])
        a[c], a[p] = a[p], a[c]
        s = gf_inv(a[c][c], poly)
        a[c] = [gf_mul(v, s, poly) for v in a[c]]
        for r in range(size):
            if r != c and a[r][c]:
                f = a[r][c]
                a[r] = [v ^ gf_mul(f, w, poly) for v, w in zip(a[r], a[c])]
    return [row[size:] for row in a]


def main(args):
    password = None
    if args[:1] == ["--password-file"]:
        password = open(args[1], "rb").read().split(b"\n")[0]
        args = args[2:]
    opened = [open_bundle(args[i], args[i + 1]) for i in range(0, len(args), 2)]
    h0 = opened[0][0]
    k, clen = h0["k"], h0["clen"]
    assert all(h["id"] == h0["id"] for h, _, _ in opened) and len(opened) >= k
    opened = opened[:k]
    xs = [h["index"] for h, _, _ in opened]
    # §6: Lagrange at 0.
    key = bytearray(32)
    for j, (_, share, _) in enumerate(opened):
        num = den = 1
        for m, x in enumerate(xs):
            if m != j:
                num, den = gf_mul(num, x), gf_mul(den, x ^ xs[j])
        basis = gf_mul(num, gf_inv(den))
        for p in range(32):
            key[p] ^= gf_mul(basis, share[p])
    # §8: invert the Vandermonde rows (in the dispersal's field), rebuild stripe (sealed
    # chunk) by stripe.
    rows = []
    for x in xs:
        row, v = [], 1
        for _ in range(k):
            row.append(v)
            v = gf_mul(v, x, DISPERSAL_FIELD)
        rows.append(row)
    inv = invert(rows, DISPERSAL_FIELD)
    tables = [[[gf_mul(c, b, DISPERSAL_FIELD) for b in range(256)] for c in row] for row in inv]
    pieces = [piece for _, _, piece in opened]
    c, offset, left = bytearray(), 0, clen
    while left > 0:
        data = min(left, S)
        seg = -(-data // k)
        segments = [p[offset:offset + seg] for p in pieces]
        stripe = bytearray()
        for i in range(k):
            out = bytearray(seg)
            for j in range(k):
                t = tables[i][j]
                out = bytearray(a ^ t[b] for a, b in zip(out, segments[j]))
            stripe += out
        assert not any(stripe[data:]), "a stripe's padding is not zero"
        c += stripe[:data]
        left -= data
        offset += seg
    outer = open_payload(bytes(key), bytes(c))
    # §10
    if outer[0] == 0:
        payload = outer[1:]
    else:
        assert outer[0] == 1 and password is not None, "password layer"
        n = 1 << outer[1]
        print(f"scrypt N={n}", file=sys.stderr)
        pw_key = hashlib.scrypt(password, salt=outer[2:34], n=n, r=8, p=1, dklen=32, maxmem=(n * 1024 + (1 << 20)) * 2)
        payload = open_stream(pw_key, outer[34:])
    assert payload[0] == h0["type"]
    meta_len = int.from_bytes(payload[1:3], "big")
    sys.stdout.buffer.write(payload[3 + meta_len:])


if __name__ == "__main__":
    main(sys.argv[1:])
