"""The drill's slow link really loses packets: datagrams across it, counted at both ends.

Whatever the kernel offers (netem, or a rate limit with the switch's random drop), a slowed
link must lose about the share it was given and pass the rest; with the switch's drop, the
switch's own count of dropped frames must account for every datagram the receiver missed.
"""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from scenario_harness.hosts import Hosts, inside, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"multi-host drill: {unavailable()}")

SENT = 2000
LOSS_PCT = 2.0
PORT = 47001


def _receiver(address: str) -> socket.socket:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind((address, PORT))
    receiver.settimeout(2.0)
    return receiver


def _count(receiver: socket.socket) -> int:
    got = 0
    while True:
        try:
            receiver.recv(64)
        except TimeoutError:
            return got
        got += 1


def test_a_slowed_link_drops_about_its_share_and_passes_the_rest() -> None:
    hosts = Hosts(2)
    try:
        hosts.create()
        receiver = inside(hosts.names[0], lambda: _receiver(hosts.ip(0)))
        sender = inside(hosts.names[1], lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        # one datagram across the healthy link first: the hosts learn each other's address
        # (ARP) before the loss could hold that up past the receiver's patience
        sender.sendto(b"hello", (hosts.ip(0), PORT))
        assert receiver.recv(64) == b"hello"
        link = hosts.slow(0, loss_pct=LOSS_PCT)
        assert not link.loss_refused, f"the slow link injects no loss: {link.loss_refused}"
        try:
            # read while sending: a socket's buffer holds only a few hundred datagrams
            counting = ThreadPoolExecutor(1).submit(_count, receiver)
            # ten 16-byte datagrams every 5 ms: about 1 Mbit/s with headers, under the
            # link's rate, so the rate limit itself drops nothing
            for burst in range(SENT // 10):
                for n in range(10):
                    sender.sendto(f"{burst:08d}{n:08d}".encode(), (hosts.ip(0), PORT))
                time.sleep(0.005)
            received = counting.result()
            dropped_by_switch = hosts.dropped(0)
        finally:
            hosts.unslow(0)
            receiver.close()
            sender.close()
        lost = SENT - received
        # 2% of 2,000 is 40 (standard deviation 6): none lost, or five times the share, is a
        # link that does not do what it was told
        assert 0 < lost < SENT * LOSS_PCT * 5 / 100, f"{lost} of {SENT} lost ({link.kind})"
        if link.kind == "tbf+nft":
            # every datagram missed is one the switch dropped; it may also have dropped a
            # few other frames of the host's (ARP, IPv6 neighbour discovery)
            assert lost <= dropped_by_switch <= lost + 10
        assert hosts.dropped(0) == 0, "the switch still drops after the link was restored"
    finally:
        hosts.destroy()
