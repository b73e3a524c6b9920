#!/usr/bin/env python3
"""The other side of vault's SLIP-39 tests: Trezor's reference implementation
(shamir-mnemonic from PyPI, in .build-venv).

    slip39_peer.py combine   < {"mnemonics": [...], "passphrase": "..."}       -> secret hex
    slip39_peer.py split     < {"secret": hex, "passphrase": "...", "group_threshold": GT,
                                "groups": [[T, N], ...], "extendable": bool, "exponent": e}
                                                                               -> JSON [[mnemonic, ...], ...]

A refusal exits 1 with the library's message on standard error.
"""
import json
import sys

import shamir_mnemonic
from shamir_mnemonic.utils import MnemonicError


def main() -> int:
    request = json.load(sys.stdin)
    passphrase = request.get("passphrase", "").encode("ascii")
    try:
        if sys.argv[1] == "combine":
            secret = shamir_mnemonic.combine_mnemonics(request["mnemonics"], passphrase)
            print(secret.hex())
        elif sys.argv[1] == "split":
            groups = shamir_mnemonic.generate_mnemonics(
                request["group_threshold"], [tuple(g) for g in request["groups"]], bytes.fromhex(request["secret"]),
                passphrase, request.get("extendable", True), request.get("exponent", 1))
            print(json.dumps(groups))
        else:
            print("unknown command", file=sys.stderr)
            return 2
    except (MnemonicError, ValueError) as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
