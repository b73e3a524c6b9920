#!/usr/bin/env python3
"""python-zeroconf as an independent mDNS peer for vault (run inside the test's namespace).

    zeroconf_peer.py browse SECONDS      print each _vault._tcp service resolved: NAME ADDR PORT fp=…
    zeroconf_peer.py register SECONDS    register a _vault._tcp service for SECONDS, then unregister
    zeroconf_peer.py watch SECONDS       print "added NAME" and "removed NAME" as they happen
"""
import socket
import sys
import time

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, Zeroconf

TYPE = "_vault._tcp.local."


def browse(seconds):
    zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
    found = {}

    class Listener:
        def add_service(self, zc, type_, name):
            info = zc.get_service_info(type_, name, timeout=3000)
            if info:
                found[name] = info

        def update_service(self, zc, type_, name):
            self.add_service(zc, type_, name)

        def remove_service(self, zc, type_, name):
            pass

    ServiceBrowser(zc, TYPE, Listener())
    time.sleep(seconds)
    for name, info in found.items():
        fp = info.properties.get(b"fp", b"").decode()
        version = info.properties.get(b"v", b"").decode()
        print(name, socket.inet_ntoa(info.addresses[0]), info.port, f"fp={fp}", f"v={version}")
    zc.close()


def register(seconds):
    zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
    info = ServiceInfo(TYPE, f"zeroconf-peer.{TYPE}", addresses=[socket.inet_aton("127.0.0.1")], port=7999,
                       properties={"v": "1", "fp": "00112233445566ff"}, server="zeroconf-peer.local.")
    zc.register_service(info)
    print("registered", flush=True)
    time.sleep(seconds)
    zc.unregister_service(info)
    zc.close()


def watch(seconds):
    zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)

    class Listener:
        def add_service(self, zc, type_, name):
            print("added", name, flush=True)

        def update_service(self, zc, type_, name):
            pass

        def remove_service(self, zc, type_, name):
            print("removed", name, flush=True)

    ServiceBrowser(zc, TYPE, Listener())
    print("watching", flush=True)
    time.sleep(seconds)
    zc.close()


if __name__ == "__main__":
    {"browse": browse, "register": register, "watch": watch}[sys.argv[1]](float(sys.argv[2]))
