"""Hosts made of Linux network namespaces, for the multi-host drill (scenario 31).

Each host is a namespace of its own with one interface (``eth0``, ``10.77.0.<n>/24``) on a
bridge that lives in a namespace of its own (the switch). An ``ops`` namespace on the same
switch is where the drill itself stands, as an operator's machine does. Nothing of this
touches the machine's own namespace: no address, route or interface is added there, so
runs side by side (and the machine) never see one another.

Faults are what a network does to a host:

* ``cut(i)``: its switch port goes down; packets to and from it are dropped, with no
  reset (a real partition: peers learn only from timeouts). ``heal(i)`` brings it back.
* ``slow(i)``: ``tc netem`` delay and loss where the kernel has netem. Where it has not, a
  token bucket (``tbf``) limits the link's rate, and the switch drops the loss share of the
  host's frames at random (an nftables ``numgen`` rule in the switch's bridge, so the
  loss is the network's: no sender sees an error); the reasons are kept.

Processes go into a host in two ways: ``launch(i)`` is a command prefix
(``ip netns exec``), and :func:`inside` runs a function in a thread that has entered the
namespace (a ``subprocess.Popen`` there starts its child inside it; sockets it opens stay
in it).

Needs root and the ``ip`` tool (iproute2); :func:`unavailable` says why when not. Loss
without netem needs ``nft`` (nftables), which ``make`` installs; without it the link is
only slowed, and :class:`SlowLink` says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from shared.agents.local import pid_alive

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
SUBNET = "10.77.0"
OPS_OCTET = 100
NAMESPACES = "/var/run/netns"
_PREFIX = "loomdrill-"
_LOSS_TABLE = "loss_h"


def unavailable() -> str | None:
    """Why hosts cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "the ip and tc tools (iproute2) are not installed"
    return None


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), input=stdin, capture_output=True, text=True, timeout=30, check=False)


def _must(*args: str) -> None:
    done = _run(*args)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])}: {done.stderr.strip()}")


def _enter(namespace: str) -> None:
    """Move the calling thread into ``namespace``'s network (setns(2) acts on one thread)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"{NAMESPACES}/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {namespace}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def inside(namespace: str, function: Callable[[], T]) -> T:
    """``function()`` run in a new thread that has entered ``namespace``; its result."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            _enter(namespace)
            box["result"] = function()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"netns-{namespace}", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


def _ours(name: str) -> int | None:
    """The pid that made namespace ``name`` (None: not one of the drill's)."""
    if not name.startswith(_PREFIX):
        return None
    pid = name.removeprefix(_PREFIX).split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def _delete(namespace: str) -> None:
    """Kill what still runs in it, then remove it."""
    pids = _run("ip", "netns", "pids", namespace).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)
    _run("ip", "netns", "del", namespace)


def sweep_leftovers() -> list[str]:
    """Remove the namespaces of drills whose process is gone (a run killed mid-way)."""
    names = [line.split()[0] for line in _run("ip", "netns", "list").stdout.splitlines() if line.strip()]
    left = [name for name in names if (pid := _ours(name)) is not None and not pid_alive(pid)]
    for name in left:
        _delete(name)
    return left


@dataclass
class SlowLink:
    """How ``slow`` degraded a link: ``netem`` (delay and loss), else ``tbf`` (rate) with
    the switch's random drop where ``nft`` is there (``loss_refused`` says why not)."""

    kind: str
    detail: str
    netem_refused: str = ""
    loss_refused: str = ""


class Hosts:
    """``count`` hosts and an ops namespace on one switch (create with :meth:`create`)."""

    def __init__(self, count: int = 3) -> None:
        self.count = count
        tag = f"{_PREFIX}{os.getpid()}-{os.urandom(2).hex()}"
        self.switch = f"{tag}-sw"
        self.ops = f"{tag}-ops"
        self.names = [f"{tag}-h{i}" for i in range(count)]
        self.created: list[str] = []

    def ip(self, i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    @property
    def ops_ip(self) -> str:
        return f"{SUBNET}.{OPS_OCTET}"

    def launch(self, i: int) -> list[str]:
        """The command prefix that runs a program on host ``i``."""
        return ["ip", "netns", "exec", self.names[i]]

    def create(self) -> None:
        sweep_leftovers()
        for namespace in (self.switch, self.ops, *self.names):
            _must("ip", "netns", "add", namespace)
            self.created.append(namespace)
            _must("ip", "-n", namespace, "link", "set", "lo", "up")
        _must("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        _must("ip", "-n", self.switch, "link", "set", "br0", "up")
        for namespace, port, address in (
            *((self.names[i], f"p{i}", self.ip(i)) for i in range(self.count)),
            (self.ops, "pops", self.ops_ip),
        ):
            _must(
                "ip",
                "-n",
                self.switch,
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                namespace,
            )
            _must("ip", "-n", self.switch, "link", "set", port, "master", "br0", "up")
            _must("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _must("ip", "-n", namespace, "link", "set", "eth0", "up")

    def destroy(self) -> None:
        for namespace in reversed(self.created):
            _delete(namespace)
        self.created.clear()

    # -- faults --------------------------------------------------------------------------------
    def cut(self, i: int) -> None:
        """Partition host ``i``: its switch port goes down."""
        _must("ip", "-n", self.switch, "link", "set", f"p{i}", "down")

    def heal(self, i: int) -> None:
        _must("ip", "-n", self.switch, "link", "set", f"p{i}", "up")

    def slow(self, i: int, *, delay_ms: int = 40, loss_pct: float = 2.0, rate: str = "2mbit") -> SlowLink:
        """Degrade host ``i``'s link both ways: netem where the kernel has it, else tbf and
        the switch's random drop."""
        ends = ((self.switch, f"p{i}"), (self.names[i], "eth0"))
        netem = ("netem", "delay", f"{delay_ms}ms", "loss", f"{loss_pct}%")
        tried = _run(
            "ip", "netns", "exec", ends[0][0], "tc", "qdisc", "add", "dev", ends[0][1], "root", *netem
        )
        if tried.returncode == 0:
            _must("ip", "netns", "exec", ends[1][0], "tc", "qdisc", "add", "dev", ends[1][1], "root", *netem)
            return SlowLink("netem", f"delay {delay_ms} ms, loss {loss_pct:g}% each way")
        tbf = ("tbf", "rate", rate, "burst", "32kbit", "latency", "400ms")
        for namespace, device in ends:
            _must("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "root", *tbf)
        refused = tried.stderr.strip()[:200]
        loss_refused = self._drop(i, loss_pct)
        if loss_refused:
            return SlowLink("tbf", f"rate {rate} each way", netem_refused=refused, loss_refused=loss_refused)
        return SlowLink("tbf+nft", f"rate {rate}, loss {loss_pct:g}% each way", netem_refused=refused)

    def _drop(self, i: int, loss_pct: float) -> str:
        """Make the switch drop ``loss_pct`` % of host ``i``'s frames each way at random;
        why it could not ("" when it does)."""
        if shutil.which("nft") is None:
            return "nft (nftables) is not installed"
        share = round(loss_pct * 100)  # of 10,000
        rules = "\n".join(
            f'{match} "p{i}" numgen random mod 10000 < {share} counter drop'
            for match in ("iifname", "oifname")
        )
        script = (
            f"table bridge {_LOSS_TABLE}{i} {{\n chain forward {{\n"
            f"  type filter hook forward priority 0; policy accept;\n{rules}\n }}\n}}\n"
        )
        done = _run("ip", "netns", "exec", self.switch, "nft", "-f", "-", stdin=script)
        return "" if done.returncode == 0 else f"nft refused the rule: {done.stderr.strip()[:200]}"

    def dropped(self, i: int) -> int:
        """Frames to and from host ``i`` the switch has dropped at random (0: none or no rule)."""
        listed = _run(
            "ip", "netns", "exec", self.switch, "nft", "list", "table", "bridge", f"{_LOSS_TABLE}{i}"
        )
        return sum(int(n) for n in re.findall(r"counter packets (\d+)", listed.stdout))

    def unslow(self, i: int) -> None:
        for namespace, device in ((self.switch, f"p{i}"), (self.names[i], "eth0")):
            _must("ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", device, "root")
        if shutil.which("nft") is not None:
            _run("ip", "netns", "exec", self.switch, "nft", "delete", "table", "bridge", f"{_LOSS_TABLE}{i}")
