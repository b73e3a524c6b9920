#!/usr/bin/env bash
# A small client of vault's URL scheme (Docs/URL.md): it encrypts a text with a shared key
# through `vault url`, parses the callback, decrypts the result and compares.
#
#   Examples/url-client.sh KEY [TEXT]
#
# The key must be unlocked in a running `vault serve` ('vault unlock KEY'), and without a
# terminal the results' destination must be allowed: this client's own scheme
# ('vault settings url-allow url-client:'). x-source is only shown, never trusted.
# Requests go to `vault url -` on standard input, so the text never shows in the process
# list. Needs python3 for the percent-encoding.
set -euo pipefail
key=${1:?usage: url-client.sh KEY [TEXT]}
text=${2:-"Hello from url-client: spaces, +plus, &ampersand, =equals, ünïcode"}
vault=${VAULT:-vault}

# Percent-encodes its argument: everything but RFC 3986's unreserved characters.
encode() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="-._~"))' "$1"; }
# Prints the decoded value of parameter $2 in the query of URL $1 ('+' stays a plus).
param() {
  python3 -c '
import sys, urllib.parse
query = sys.argv[1].split("?", 1)[1] if "?" in sys.argv[1] else ""
for pair in query.split("&"):
    name, _, value = pair.partition("=")
    if urllib.parse.unquote(name) == sys.argv[2]:
        print(urllib.parse.unquote(value)); break
' "$1" "$2"
}

callback=$(printf 'vault://x-callback-url/encrypt?plaintext=%s&key=%s&description=%s&x-source=url-client&x-success=%s&x-error=%s\n' \
  "$(encode "$text")" "$(encode "$key")" "$(encode "from url-client")" \
  "$(encode "url-client://done?IACRequestID=1")" "$(encode "url-client://failed?IACRequestID=1")" | "$vault" url -) || {
  echo "url-client: encrypt failed: $callback" >&2; exit 1; }
echo "encrypt answered: ${callback:0:80}…"
data=$(param "$callback" encryptedData)
[ -n "$data" ] || { echo "url-client: no encryptedData in $callback" >&2; exit 1; }

callback=$(printf 'vault://x-callback-url/decrypt?encryptedData=%s&x-source=url-client&x-success=%s\n' \
  "$(encode "$data")" "$(encode "url-client://done?IACRequestID=2")" | "$vault" url -)
back=$(param "$callback" plaintext)
echo "decrypt answered: $back"
[ "$(param "$callback" IACRequestID)" = 2 ] || { echo "url-client: IACRequestID lost" >&2; exit 1; }
if [ "$back" = "$text" ]; then echo "url-client: round trip ok"; else echo "url-client: MISMATCH" >&2; exit 1; fi
