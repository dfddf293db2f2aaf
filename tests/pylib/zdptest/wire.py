#!/usr/bin/env python3
"""A wire with a latency and a bandwidth between two test hosts, in user space: what `tc netem`
does, for kernels built without it (CONFIG_NET_SCH_NETEM off, as on some VM kernels).

Each host gets a TUN device (made by hosts.py, addressed and up in the host's network namespace);
this process attaches to both, reads every IP packet one host sends and writes it into the other
after the wire's delay, at the wire's rate: a packet leaves when the wire has finished sending the
ones before it (len·8/rate each), then arrives `delay` later. A queue longer than `queue_ms` of
sending drops the packet, as a router's would, and TCP slows down. Each direction is its own wire.

usage: wire.py NETNS_A DEV_A NETNS_B DEV_B DELAY_MS RATE_MBIT [QUEUE_MS]
       (RATE_MBIT 0: no limit; runs until killed; prints "ready" once attached)
"""
import ctypes
import fcntl
import heapq
import os
import struct
import sys
import threading
import time

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def enter_netns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path})")
    finally:
        os.close(fd)


def attach(netns, dev):
    """An fd on the TUN device `dev` of network namespace `netns` (a name under /var/run/netns)."""
    enter_netns(f"/var/run/netns/{netns}")
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
    return fd


class Wire:
    """One direction: packets read from `src` written to `dst` when they arrive."""

    def __init__(self, src, dst, delay_s, rate_bps, queue_s):
        self.src, self.dst = src, dst
        self.delay_s, self.rate_bps, self.queue_s = delay_s, rate_bps, queue_s
        self.free_at = 0.0  # when the wire has sent everything queued
        self.due = []       # (arrival time, sequence, packet)
        self.seq = 0
        self.cv = threading.Condition()

    def reader(self):
        while True:
            packet = os.read(self.src, 65536)
            now = time.monotonic()
            with self.cv:
                start = max(now, self.free_at)
                if self.rate_bps and start - now > self.queue_s:
                    continue  # the queue is full: dropped
                sent = start + (len(packet) * 8 / self.rate_bps if self.rate_bps else 0.0)
                self.free_at = sent
                heapq.heappush(self.due, (sent + self.delay_s, self.seq, packet))
                self.seq += 1
                self.cv.notify()

    def writer(self):
        while True:
            with self.cv:
                while not self.due:
                    self.cv.wait()
                when = self.due[0][0]
                wait = when - time.monotonic()
                if wait > 0:
                    self.cv.wait(timeout=wait)  # or an earlier arrival woke us: look again
                    continue
                _, _, packet = heapq.heappop(self.due)
            try:
                os.write(self.dst, packet)
            except OSError:
                pass  # the device is down (a cut link): the packet is lost


def main():
    if len(sys.argv) not in (7, 8):
        sys.exit(__doc__)
    ns_a, dev_a, ns_b, dev_b = sys.argv[1:5]
    delay_s, rate_bps = float(sys.argv[5]) / 1e3, float(sys.argv[6]) * 1e6
    queue_s = float(sys.argv[7]) / 1e3 if len(sys.argv) == 8 else 0.1
    fd_a, fd_b = attach(ns_a, dev_a), attach(ns_b, dev_b)
    threads = []
    for src, dst in ((fd_a, fd_b), (fd_b, fd_a)):
        w = Wire(src, dst, delay_s, rate_bps, queue_s)
        threads += [threading.Thread(target=w.reader, daemon=True), threading.Thread(target=w.writer, daemon=True)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
