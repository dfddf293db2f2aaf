"""Test hosts on one machine: network namespaces joined by a veth pair (or by a user-space wire with
a latency and a bandwidth, wire.py), and OpenMPI run across them over TCP as across real
machines (tests/cli/multihost_tests.py, bench/multihost/run.py).

Each host is a network namespace of its own (own interfaces, own loopback, own address on the link
10.213.0.0/24) whose processes also see a hostname of their own (a UTS namespace entered by
`unshare -u`), so OpenMPI takes them for separate nodes: one daemon per host, shared memory only
within a host, TCP between them. mpirun runs on host 0; it starts the daemon of host 1 through a
launch agent (plm_rsh_agent) that enters that host's namespaces where it would otherwise ssh.

    with TestHosts(workdir) as hosts:           # or TestHosts.unavailable() -> reason to skip
        hosts.shape(delay_ms=1, rate_mbit=1000)   # the link's latency and bandwidth, both ways
        cmd = hosts.mpirun(["zerodp", "train", ...], ranks_per_host=2)
        hosts.sever(); hosts.restore()            # the link down, then up again

Needs root, `ip` (iproute2) and `unshare` (util-linux); `tc` for shaping the link. Everything made is removed
on exit, processes still running in the namespaces included.
"""
import os
import shutil
import subprocess
import sys

SUBNET = "10.213.0.0/24"  # the test link's addresses: 10.213.0.1 (host 0), 10.213.0.2 (host 1), ...


def _ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), capture_output=True, text=True, check=check)


def _kill_all_in(netns):
    """SIGKILL to every process in network namespace `netns`."""
    for pid in _ip("netns", "pids", netns, check=False).stdout.split():
        try:
            os.kill(int(pid), 9)
        except (OSError, ValueError):
            pass


class TestHosts:
    """Two test hosts, h0 and h1, and the link between them."""

    def __init__(self, workdir, hosts=2, tag=None, link="veth"):
        """link: "veth" (a veth pair, shaped with tc) or "wire" (a TUN device on each host, joined by
        wire.py in user space: latency and bandwidth where the kernel has no netem)."""
        if hosts != 2:
            raise ValueError("TestHosts joins exactly 2 hosts by one link")
        if link not in ("veth", "wire"):
            raise ValueError(f"link must be veth or wire, got {link}")
        self.link = link
        self.wire = None  # the wire.py process
        self.workdir = workdir
        # Names unique to this process (tests run side by side), which also tell remove_stale() whose they are.
        self.tag = tag or f"zdp{os.getpid()}"
        self.names = [f"h{i}" for i in range(hosts)]
        self.netns = [f"{self.tag}{n}" for n in self.names]
        self.links = [f"{self.tag}v{i}" for i in range(hosts)]  # interface names: at most 15 characters
        self.addresses = [f"10.213.0.{i + 1}" for i in range(hosts)]
        self.made = []

    @staticmethod
    def unavailable():
        """Why test hosts cannot be made here (None when they can)."""
        if os.geteuid() != 0:
            return "network namespaces need root"
        for tool in ("ip", "unshare", "tc"):
            if shutil.which(tool) is None:
                return f"'{tool}' is not installed (iproute2, util-linux)"
        probe = f"zdpprobe{os.getpid() % 100000}"
        r = _ip("netns", "add", probe, check=False)
        if r.returncode != 0:
            return f"cannot make a network namespace: {r.stderr.strip()[:200]}"
        _ip("netns", "del", probe, check=False)
        return None

    @staticmethod
    def remove_stale():
        """Removes the test hosts of processes that are gone (killed before they could clean up)."""
        for line in _ip("netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if not (name.startswith("zdp") and name[-2:] in ("h0", "h1") and name[3:-2].isdigit()):
                continue
            if not os.path.exists(f"/proc/{int(name[3:-2])}"):
                _kill_all_in(name)
                _ip("netns", "del", name, check=False)

    @staticmethod
    def has_netem():
        """Whether this kernel has tc's netem (tried on a dummy veth in a namespace of its own)."""
        probe = f"zdpnetem{os.getpid()}"
        if _ip("netns", "add", probe, check=False).returncode != 0:
            return False
        try:
            _ip("-n", probe, "link", "add", "qa", "type", "veth", "peer", "name", "qb", check=False)
            r = subprocess.run(["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "qa", "root", "netem",
                                "delay", "1ms"], capture_output=True)
            return r.returncode == 0
        finally:
            _ip("netns", "del", probe, check=False)

    def __enter__(self):
        self.remove_stale()
        try:
            for ns in self.netns:
                _ip("netns", "add", ns)
                self.made.append(ns)
            if self.link == "veth":
                _ip("link", "add", self.links[0], "type", "veth", "peer", "name", self.links[1])
                for ns, link in zip(self.netns, self.links):
                    _ip("link", "set", link, "netns", ns)
            else:
                for ns, link in zip(self.netns, self.links):
                    _ip("-n", ns, "tuntap", "add", "dev", link, "mode", "tun")
                    _ip("-n", ns, "link", "set", "dev", link, "mtu", "64000")  # few packets: a Python wire keeps up
            for ns, link, addr in zip(self.netns, self.links, self.addresses):
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", link)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", link, "up")
            if self.link == "wire":
                self._start_wire(0.0, None)
        except Exception:
            self.__exit__(None, None, None)
            raise
        self._write_scripts()
        return self

    def _start_wire(self, delay_ms, rate_mbit):
        self._stop_wire()
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire.py")
        self.wire = subprocess.Popen([sys.executable, script, self.netns[0], self.links[0], self.netns[1],
                                      self.links[1], str(delay_ms), str(rate_mbit or 0)],
                                     stdout=subprocess.PIPE, text=True)
        if self.wire.stdout.readline().strip() != "ready":
            raise RuntimeError("wire.py did not attach to the hosts' TUN devices")

    def _stop_wire(self):
        if self.wire is not None:
            self.wire.kill()
            self.wire.wait()
            self.wire = None

    def __exit__(self, *exc):
        self._stop_wire()
        for ns in self.made:
            _kill_all_in(ns)
            _ip("netns", "del", ns, check=False)  # takes its end of the veth pair, and so the pair
        self.made = []
        return False

    def _write_scripts(self):
        # enter: runs a command on a host (its namespaces, its hostname).
        self.enter = os.path.join(self.workdir, "enter-host")
        with open(self.enter, "w") as f:
            f.write('#!/bin/sh\n# enter-host HOST COMMAND...: run COMMAND on test host HOST\n'
                    'host=$1; shift\n'
                    f'exec ip netns exec "{self.tag}$host" unshare -u /bin/sh -c \'hostname "$0" && exec "$@"\' '
                    '"$host" "$@"\n')
        # agent: what mpirun calls instead of ssh: `agent [ssh options] HOST REMOTE COMMAND WORDS...`;
        # like ssh it hands the words to a shell there.
        self.agent = os.path.join(self.workdir, "launch-agent")
        with open(self.agent, "w") as f:
            f.write('#!/bin/sh\n# mpirun\'s launch agent for the test hosts: enters HOST instead of ssh-ing to it\n'
                    'while [ "${1#-}" != "$1" ]; do shift; done\n'
                    'host=$1; shift\n'
                    f'exec ip netns exec "{self.tag}$host" unshare -u /bin/sh -c "hostname $host && $*"\n')
        for p in (self.enter, self.agent):
            os.chmod(p, 0o755)
        self.hostfile = os.path.join(self.workdir, "hostfile")

    def on_host(self, host, cmd):
        """`cmd` run on test host number `host`."""
        return [self.enter, self.names[host]] + list(cmd)

    def mpirun_args(self, ranks_per_host=2, mpi_timeout=None, output_dir=None):
        """mpirun's arguments (after "mpirun") that run ranks_per_host ranks on each host (ranks 0..k-1 on
        h0, k..2k-1 on h1), OpenMPI's messages and daemons over the test link. --novm: daemons only on
        the hosts that run ranks (a job asking for fewer ranks than h0 holds does not need h1)."""
        with open(self.hostfile, "w") as f:
            for n in self.names:
                f.write(f"{n} slots={ranks_per_host}\n")
        args = ["--hostfile", self.hostfile, "-n", str(ranks_per_host * len(self.names)), "--novm",
                "--map-by", "slot", "--mca", "plm_rsh_agent", self.agent,
                "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", SUBNET,
                "--mca", "oob_tcp_if_include", SUBNET, "-x", "OMP_NUM_THREADS"]
        for var in sorted(os.environ):  # the test hooks a driver sets reach the other host too
            if var.startswith("ZERODP_"):
                args += ["-x", var]
        if mpi_timeout:
            args += ["--timeout", str(mpi_timeout)]
        if output_dir:
            args += ["--output-filename", output_dir]
        return args

    def mpirun(self, cmd, ranks_per_host=2, mpi_timeout=None, output_dir=None):
        """The command line that runs `cmd` under mpirun from host 0 (see mpirun_args)."""
        return self.on_host(0, ["mpirun"] + self.mpirun_args(ranks_per_host, mpi_timeout, output_dir) + list(cmd))

    def _tc(self, host, *args):
        return subprocess.run(["ip", "netns", "exec", self.netns[host], "tc", "qdisc"] + list(args),
                              capture_output=True, text=True)

    def shape(self, delay_ms=0.0, rate_mbit=None):
        """Gives the link a one-way latency and a bandwidth, each direction. A veth link: tc netem, or where
        the kernel has no netem (some VM kernels), tc tbf for the bandwidth alone; returns the qdisc used
        ("netem", "tbf", or "none" once cleared) and raises RuntimeError when a latency is asked for
        without netem. A wire: its process restarted with them (returns "wire"). shape(0, None) clears it."""
        if self.link == "wire":
            self._start_wire(delay_ms, rate_mbit)
            return "wire"
        used = "none"
        for h, link in enumerate(self.links):
            subprocess.run(["ip", "netns", "exec", self.netns[h], "tc", "qdisc", "del", "dev", link, "root"],
                           capture_output=True)
            if not delay_ms and not rate_mbit:
                continue
            spec = (["delay", f"{delay_ms}ms"] if delay_ms else []) + (["rate", f"{rate_mbit}mbit"] if rate_mbit else [])
            r = self._tc(h, "replace", "dev", link, "root", "netem", *spec, "limit", "100000")
            if r.returncode == 0:
                used = "netem"
                continue
            if delay_ms:
                raise RuntimeError(f"tc netem is not available here ({r.stderr.strip()[:200]}): no latency can be "
                                   f"added; ask for a bandwidth alone to shape with tbf")
            # tbf: the bucket must hold a whole segment of the veth's offloads (64 KiB), and 10 ms at the rate.
            burst = max(128 * 1024, int(rate_mbit * 1e6 / 8 / 100))
            r = self._tc(h, "replace", "dev", link, "root", "tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst),
                         "latency", "100ms")
            if r.returncode != 0:
                raise RuntimeError(f"tc tbf failed on {link}: {r.stderr.strip()[:200]}")
            used = "tbf"
        return used

    def kill_host(self, host):
        """SIGKILL to every process on the host (its MPI daemon and ranks): a machine that died."""
        _kill_all_in(self.netns[host])

    def sever(self):
        """Cuts the link (host 1's end down): packets are lost, nothing is refused, as a pulled cable."""
        _ip("-n", self.netns[1], "link", "set", self.links[1], "down")

    def restore(self):
        _ip("-n", self.netns[1], "link", "set", self.links[1], "up")

    def netns_inode(self, host):
        """The inode of host's network namespace, as /proc/PID/ns/net shows it."""
        return os.stat(f"/var/run/netns/{self.netns[host]}").st_ino

    def processes(self, exe):
        """{pid: host} of the running processes of executable `exe` on the test hosts."""
        inodes = {self.netns_inode(h): h for h in range(len(self.names))}
        found = {}
        real = os.path.realpath(exe)
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                if os.path.realpath(f"/proc/{d}/exe") != real:
                    continue
                ino = os.stat(f"/proc/{d}/ns/net").st_ino
            except OSError:
                continue
            if ino in inodes:
                found[int(d)] = inodes[ino]
        return found
