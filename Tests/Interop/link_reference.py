#!/usr/bin/env python3
"""An independent reference encoder/decoder of vault share links ("vault-link-v1").

Written from the link format description alone: no vault code. It uses the Python standard
library and the `cryptography` package (AESGCM, HKDF, PBKDF2HMAC).

    link_reference.py encode --type note|file [--name NAME] [--password PW [--iterations N]] < CONTENT
        prints {"blob_b64": ..., "fragment": ..., "claim_hash": ..., "iterations": N or 0}
    link_reference.py decode --fragment FRAG [--password PW --iterations N] < BLOB
        writes the META JSON (one line) to stderr and CONTENT to stdout; exit 1 on any failure
    link_reference.py selftest

`encode --fragment FRAG` uses a given fragment instead of fresh random bytes, which makes the
blob deterministic: for known-answer comparisons with another implementation only.

Format summary (a link is BASE/s/ID#FRAG):
  FRAG  = b64url(F)        F: 32 random bytes, no password          (43 chars)
        = b64url(F || S)   S: 16-byte PBKDF2 salt, with a password   (64 chars)
  IKM   = F, or F || PBKDF2-HMAC-SHA-256(NFC(password), S, N, 32)
  K     = HKDF-SHA-256(IKM, salt "vault-link-v1", info "content", 32)   content key
  C     = HKDF-SHA-256(IKM, salt "vault-link-v1", info "claim", 32)     claim secret
  BLOB  = "VLNK" 01 00 00 00 || chunk_0 || ... || chunk_{n-1}
  chunk_i = AES-256-GCM(K, nonce 000000 || u64be(i) || last, aad HEADER, 64 KiB plaintext)
  plaintext stream = u32be(m) || META (m bytes of UTF-8 JSON, 2..4096) || CONTENT
"""
import argparse
import base64
import binascii
import hashlib
import json
import os
import struct
import sys
import unicodedata

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

HEADER = b"VLNK\x01\x00\x00\x00"
CHUNK = 65536              # plaintext bytes per chunk
PIECE = CHUNK + 16         # ciphertext + GCM tag per full chunk
HKDF_SALT = b"vault-link-v1"
MIN_ITERATIONS = 600_000
MAX_ITERATIONS = 10_000_000
META_MIN, META_MAX = 2, 4096
NAME_MAX = 255
FRAG_PLAIN, FRAG_PASSWORD = 43, 64   # fragment lengths in characters


class LinkError(Exception):
    """Any reason a link cannot be encoded or opened."""


# ---------------------------------------------------------------------------------------------
# base64url without padding

def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """Strict decoding: only the url-safe alphabet, no padding, canonical trailing bits."""
    if len(text) % 4 == 1 or any(c not in _B64URL for c in text):
        raise LinkError("not base64url")
    try:
        data = base64.b64decode(text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4),
                                validate=True)
    except binascii.Error as exc:
        raise LinkError("not base64url") from exc
    if b64url(data) != text:
        raise LinkError("not canonical base64url")
    return data


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


# ---------------------------------------------------------------------------------------------
# keys

def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise LinkError(f"unsupported password setting: iterations {iterations} is outside "
                        f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")


def password_key(password: str, salt: bytes, iterations: int) -> bytes:
    check_iterations(iterations)
    normalized = unicodedata.normalize("NFC", password).encode("utf-8")
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=iterations)
    return kdf.derive(normalized)


def hkdf(ikm: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=HKDF_SALT, info=info).derive(ikm)


def derive_keys(fragment: str, password: "str | None", iterations: int = 0):
    """Returns (content key K, claim secret C) for a fragment and the password, if any."""
    if len(fragment) not in (FRAG_PLAIN, FRAG_PASSWORD):
        raise LinkError("this link is incomplete or damaged (fragment length)")
    raw = unb64url(fragment)
    if len(fragment) == FRAG_PLAIN:
        if password is not None:
            raise LinkError("this link has no password, but one was given")
        ikm = raw
    else:
        if password is None:
            raise LinkError("this link needs a password")
        f, salt = raw[:32], raw[32:]
        ikm = f + password_key(password, salt, iterations)
    return hkdf(ikm, b"content"), hkdf(ikm, b"claim")


# ---------------------------------------------------------------------------------------------
# blob

def nonce(index: int, last: bool) -> bytes:
    return b"\x00\x00\x00" + struct.pack(">Q", index) + (b"\x01" if last else b"\x00")


def make_meta(kind: str, name: "str | None") -> bytes:
    if kind == "note":
        meta = {"type": "note"}
    elif kind == "file":
        if name is None:
            raise LinkError("a file needs --name")
        if not 1 <= len(name.encode("utf-8")) <= NAME_MAX:
            raise LinkError(f"the name must be 1 to {NAME_MAX} UTF-8 bytes")
        meta = {"type": "file", "name": name}
    else:
        raise LinkError("type must be note or file")
    # Compact, sorted keys ({"name":…,"type":"file"}): key order does not matter to a reader,
    # but sorted keys are what vault itself writes, so `encode --fragment` blobs compare equal.
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":"),
                      sort_keys=True).encode("utf-8")


def seal(key: bytes, meta: bytes, content: bytes) -> bytes:
    if not META_MIN <= len(meta) <= META_MAX:
        raise LinkError("META must be 2..4096 bytes")
    stream = struct.pack(">I", len(meta)) + meta + content
    aead = AESGCM(key)
    count = max(1, -(-len(stream) // CHUNK))
    out = [HEADER]
    for i in range(count):
        piece = stream[i * CHUNK:(i + 1) * CHUNK]
        out.append(aead.encrypt(nonce(i, i == count - 1), piece, HEADER))
    return b"".join(out)


def split_pieces(blob: bytes) -> "list[bytes]":
    if blob[:len(HEADER)] != HEADER or len(blob) < len(HEADER):
        raise LinkError("damaged: bad header")
    body = blob[len(HEADER):]
    if not body:
        raise LinkError("damaged: nothing after the header")
    full, rest = divmod(len(body), PIECE)
    if rest and rest < 16:
        raise LinkError("damaged: the final chunk is shorter than a tag")
    count = full + (1 if rest else 0)
    return [body[i * PIECE:(i + 1) * PIECE] for i in range(count)]


def open_blob(key: bytes, blob: bytes) -> "tuple[dict, bytes]":
    """Decrypts everything first; returns (META, CONTENT) only when every chunk authenticated."""
    pieces = split_pieces(blob)
    aead = AESGCM(key)
    parts = []
    for i, piece in enumerate(pieces):
        try:
            parts.append(aead.decrypt(nonce(i, i == len(pieces) - 1), piece, HEADER))
        except InvalidTag as exc:
            raise LinkError("the key is wrong or the content damaged") from exc
    stream = b"".join(parts)
    return parse_stream(stream)


def _reject_constant(name):
    raise ValueError(f"non-JSON constant {name}")


def parse_stream(stream: bytes) -> "tuple[dict, bytes]":
    if len(stream) < 4:
        raise LinkError("damaged: no META length")
    (m,) = struct.unpack(">I", stream[:4])
    if not META_MIN <= m <= META_MAX or 4 + m > len(stream):
        raise LinkError("damaged: bad META length")
    try:
        meta = json.loads(stream[4:4 + m].decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise LinkError("damaged: META is not UTF-8 JSON") from exc
    if not isinstance(meta, dict) or meta.get("type") not in ("note", "file"):
        raise LinkError("damaged: META type")
    if meta["type"] == "file":
        name = meta.get("name")
        if not isinstance(name, str):
            raise LinkError("damaged: META name")
        try:
            if not 1 <= len(name.encode("utf-8")) <= NAME_MAX:
                raise LinkError("damaged: META name empty or too long")
        except UnicodeEncodeError as exc:  # a lone surrogate escaped in the JSON
            raise LinkError("damaged: META name") from exc
    return meta, stream[4 + m:]


# ---------------------------------------------------------------------------------------------
# encode / decode

def encode(kind: str, content: bytes, name=None, password=None, iterations=MIN_ITERATIONS,
           fragment=None) -> dict:
    """`fragment` replaces fresh randomness, for known-answer tests only."""
    meta = make_meta(kind, name)
    if password is None:
        fragment = fragment or b64url(os.urandom(32))
        iterations = 0
    else:
        if password == "":
            raise LinkError("the password is empty")
        check_iterations(iterations)
        fragment = fragment or b64url(os.urandom(32 + 16))
    key, claim = derive_keys(fragment, password, iterations)
    return {
        "blob_b64": base64.b64encode(seal(key, meta, content)).decode("ascii"),
        "fragment": fragment,
        "claim_hash": b64url(hashlib.sha256(claim).digest()),
        "iterations": iterations,
    }


def decode(fragment: str, blob: bytes, password=None, iterations=0) -> "tuple[dict, bytes]":
    key, _claim = derive_keys(fragment, password, iterations)
    return open_blob(key, blob)


# ---------------------------------------------------------------------------------------------
# self-test

def selftest() -> None:
    def must_fail(what, fn):
        try:
            fn()
        except LinkError:
            return
        raise AssertionError(f"{what} did not fail")

    # Known answers for the pieces that do not depend on randomness.
    assert nonce(1, True).hex() == "000000" + "0000000000000001" + "01"
    assert make_meta("note", None) == b'{"type":"note"}'
    assert unb64url(b64url(b"\xff" * 32)) == b"\xff" * 32
    must_fail("non-canonical base64url", lambda: unb64url("A" * 42 + "B"))
    must_fail("padding", lambda: unb64url("AAA="))

    for size in (0, 1, 65535, 65536, 65537, 3 * CHUNK):
        content = os.urandom(size)
        for kind, name in (("note", None), ("file", "réport ✓.pdf")):
            link = encode(kind, content, name=name)
            blob = base64.b64decode(link["blob_b64"])
            meta, got = decode(link["fragment"], blob)
            assert got == content and meta["type"] == kind and meta.get("name") == name, size
            assert len(link["fragment"]) == FRAG_PLAIN
        stream_len = 4 + len(make_meta(kind, name)) + size
        pieces = split_pieces(blob)
        assert len(pieces) == max(1, -(-stream_len // CHUNK)), (size, len(pieces))

        # Truncation: drop the final chunk (when there is more than one) or cut the only one.
        if len(pieces) > 1:
            cut = HEADER + b"".join(pieces[:-1])
            must_fail(f"truncated {size}", lambda: decode(link["fragment"], cut))
        must_fail(f"cut tail {size}", lambda: decode(link["fragment"], blob[:-1]))
        must_fail(f"header only {size}", lambda: decode(link["fragment"], HEADER))
        flipped = bytearray(blob)
        flipped[len(HEADER) + len(flipped[len(HEADER):]) // 2] ^= 0x01
        must_fail(f"flipped {size}", lambda: decode(link["fragment"], bytes(flipped)))
        bad_header = b"VLNK\x02" + blob[5:]
        must_fail(f"header {size}", lambda: decode(link["fragment"], bad_header))
        other = encode("note", b"")["fragment"]
        must_fail(f"wrong fragment {size}", lambda: decode(other, blob))
        must_fail("short fragment", lambda: decode(link["fragment"][:-1], blob))

    # Reordering two full chunks must fail (the index is in the nonce).
    big = encode("note", os.urandom(3 * CHUNK))
    blob = base64.b64decode(big["blob_b64"])
    p = split_pieces(blob)
    swapped = HEADER + p[1] + p[0] + b"".join(p[2:])
    must_fail("swapped chunks", lambda: decode(big["fragment"], swapped))

    # Password links: right password (NFC-equivalent spelling), wrong password, kinds.
    pw_nfd = "cafe\u0301"          # "café" decomposed; NFC makes it "caf\u00e9"
    link = encode("note", b"hello", password="caf\u00e9", iterations=MIN_ITERATIONS)
    blob = base64.b64decode(link["blob_b64"])
    assert len(link["fragment"]) == FRAG_PASSWORD and link["iterations"] == MIN_ITERATIONS
    assert decode(link["fragment"], blob, pw_nfd, MIN_ITERATIONS)[1] == b"hello"
    must_fail("wrong password", lambda: decode(link["fragment"], blob, "cafe", MIN_ITERATIONS))
    must_fail("no password", lambda: decode(link["fragment"], blob))
    must_fail("low iterations", lambda: decode(link["fragment"], blob, "café", 1000))
    must_fail("password on plain link", lambda: decode(encode("note", b"")["fragment"], blob, "x"))

    # Malformed META inside a correctly encrypted blob is damage too.
    key = os.urandom(32)
    for meta in (b'{"type":"other"}', b"[1]", b'{"type":"file"}', b"\xff\xfe",
                 b'{"type":"file","name":""}', b'{"type":"file","name":7}', b"\xef\xbb\xbf{}",
                 b'{"type":"file","name":"' + b"a" * 256 + b'"}', b"{"):
        must_fail(f"meta {meta[:20]!r}", lambda: open_blob(key, seal(key, meta, b"")))
    assert open_blob(key, seal(key, b'{"type":"note","x":1}', b"ok"))[1] == b"ok"
    # A given fragment makes encoding deterministic (GCM nonces depend only on the index).
    fixed = b64url(bytes(range(32)))
    one, two = encode("note", b"kat", fragment=fixed), encode("note", b"kat", fragment=fixed)
    assert one == two and decode(fixed, base64.b64decode(one["blob_b64"]))[1] == b"kat"
    print("selftest: ok")


# ---------------------------------------------------------------------------------------------
# command line

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    enc = sub.add_parser("encode", help="encrypt stdin into a blob")
    enc.add_argument("--type", choices=("note", "file"), required=True)
    enc.add_argument("--name")
    enc.add_argument("--password")
    enc.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    enc.add_argument("--fragment", help="use this fragment instead of fresh random bytes "
                     "(known-answer tests only: the blob is then deterministic)")
    dec = sub.add_parser("decode", help="decrypt a blob from stdin")
    dec.add_argument("--fragment", required=True)
    dec.add_argument("--password")
    dec.add_argument("--iterations", type=int, default=0)
    sub.add_parser("selftest", help="round-trip and tamper checks")
    args = parser.parse_args(argv)

    try:
        if args.command == "encode":
            if args.name is not None and args.type == "note":
                raise LinkError("--name is for files only")
            content = sys.stdin.buffer.read()
            print(json.dumps(encode(args.type, content, args.name, args.password,
                                    args.iterations, args.fragment)))
        elif args.command == "decode":
            if args.password is not None and not args.iterations:
                raise LinkError("--password needs --iterations (from the status answer)")
            meta, content = decode(args.fragment, sys.stdin.buffer.read(), args.password,
                                   args.iterations)
            sys.stderr.write(json.dumps(meta, ensure_ascii=False, separators=(",", ":")) + "\n")
            sys.stderr.flush()
            sys.stdout.buffer.write(content)
            sys.stdout.buffer.flush()
        else:
            selftest()
    except LinkError as exc:
        print(f"link_reference: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
