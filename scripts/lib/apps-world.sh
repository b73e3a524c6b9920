# Sourced by scripts/examples and scripts/bench-sync: the world apps on vault run in
# (Docs/API.md), on this machine's loopback alone. Needs $vault (the binary) and $work (an
# empty directory, removed by the caller) and the pids array (filled here, stopped by the
# caller). Not run.
#
# apps_world MIN_RELAYS makes, in $work: three relays (SQLite); Alice, Bob and Carol (no
# passphrase: nobody is there to type one), trusting each other and releasing key pieces to
# each other without asking; group "team" on the three relays, owned by Alice; key "family",
# 2 of 3, tied to the group with each change stored on MIN_RELAYS relays; a `vault serve` for
# each; the key unlocked for a day in Alice's and Bob's agents (Bob names it "family" too).

# quiet COMMAND...: runs it, showing its output only if it fails.
quiet() { "$@" > "$work/quiet.log" 2>&1 || { echo "failed: $*" >&2; cat "$work/quiet.log" >&2; exit 1; }; }

# wait_for FILE PATTERN: prints the first capture of sed pattern PATTERN in FILE, within 10 s.
wait_for() {
  local found=
  for _ in $(seq 100); do
    found=$(sed -n "s/$2/\1/p" "$1" | head -n1)
    [ -n "$found" ] && { echo "$found"; return; }
    sleep 0.1
  done
  echo "timed out waiting in $1" >&2; cat "$1" >&2; exit 1
}

apps_world() {
  local min_relays=$1 urls=() who other i
  for i in 1 2 3; do
    "$vault" relay serve --listen 127.0.0.1:0 --store "sqlite:$work/relay$i.db" > "$work/relay$i.log" 2>&1 &
    pids+=($!)
    urls+=("$(wait_for "$work/relay$i.log" '.*listening on \(http:[^ ]*\).*')")
  done
  people=(alice bob carol)
  for who in "${people[@]}"; do quiet "$vault" init --home "$work/$who" --label "$who" --no-passphrase; done
  for who in "${people[@]}"; do
    for other in "${people[@]}"; do
      [ "$who" = "$other" ] && continue
      quiet "$vault" peer add --home "$work/$who" "$("$vault" id --home "$work/$other" --format text)" --label "$other" --yes
      quiet "$vault" secrets auto-release --home "$work/$who" --for "$other"
    done
    for i in 1 2 3; do quiet "$vault" relay add --home "$work/$who" "r$i" "${urls[$((i - 1))]}" --yes; done
  done
  quiet "$vault" group create --home "$work/alice" team --relays r1,r2,r3 --members bob,carol
  for who in bob carol; do quiet "$vault" receive --home "$work/$who"; done
  declare -gA port
  for who in "${people[@]}"; do
    setsid "$vault" serve --home "$work/$who" --listen 127.0.0.1 --port 0 --no-mdns > /dev/null 2> "$work/$who-serve.log" &
    pids+=($!)
    port[$who]=$(wait_for "$work/$who-serve.log" '.*listening on 127\.0\.0\.1:\([0-9]*\).*')
    wait_for "$work/$who-serve.log" '.*\(agent listening\).*' > /dev/null
  done
  reach() { local o; for o in "${people[@]}"; do [ "$o" = "$1" ] || printf -- '--peer\n%s=127.0.0.1:%s\n' "$o" "${port[$o]}"; done; }
  key=$("$vault" key create --home "$work/alice" family --to bob,carol -k 2 --group team $(reach alice) 2> "$work/quiet.log") ||
    { cat "$work/quiet.log" >&2; exit 1; }
  quiet "$vault" secrets rename --home "$work/bob" "${key:0:16}" family
  for who in alice bob; do
    quiet "$vault" key sync --home "$work/$who" family --group team --min-relays "$min_relays"
    quiet "$vault" unlock --home "$work/$who" family --for 24h $(reach "$who")
  done
}
