#!/usr/bin/env python3
"""A shopping list shared by the holders of a vault key, through the key's relays.

usage: shopping_list.py KEY add ITEM [QUANTITY] | rm ITEM | list | watch
Each item is an object of app "shopping-list" (Docs/API.md); vault serve must run, the key unlocked.
"""
import json, subprocess, sys

def vault(*args, stdin=None):
    done = subprocess.run(["vault", "app", *args], input=stdin, capture_output=True, text=True)
    if done.returncode: sys.exit(done.stderr.strip())
    return done.stdout

def show(items):
    print("; ".join(f"{v['quantity']} {v['name']}" for _, v in sorted(items.items())) or "(empty)", flush=True)

def main(key, command, *args):
    app = ["shopping-list", "--key", key]
    if command == "add" and args:
        value = {"name": args[0], "quantity": int(args[1]) if len(args) > 1 else 1}
        vault("put", *app, "item", args[0], stdin=json.dumps(value))
    elif command == "rm" and args:
        vault("rm", *app, "item", args[0])
    elif command == "list":
        show({o["id"]: o["value"] for o in json.loads(vault("list", *app, "item", "--json")) if "value" in o})
    elif command == "watch":  # the list as it is, then again at each change, as it happens
        items, watch = {}, subprocess.Popen(["vault", "app", "watch", *app, "--json"], stdout=subprocess.PIPE, text=True)
        ready = False  # the objects held now come first, then "ready": the list is shown once for them
        for change in map(json.loads, watch.stdout):
            if change["event"] == "put": items[change["id"]] = change["value"]
            elif change["event"] == "delete": items.pop(change["id"], None)
            elif change["event"] == "conflict": print(f"conflict: {change['author']} also wrote {change['value']}; kept as a copy", flush=True)
            ready = ready or change["event"] == "ready"
            if ready: show(items)
    else:
        sys.exit(__doc__)

if __name__ == "__main__":
    main(*sys.argv[1:]) if len(sys.argv) > 2 else sys.exit(__doc__)
