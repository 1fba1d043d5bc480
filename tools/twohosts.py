#!/usr/bin/env python3
"""Two hosts on one machine, for trying an MPI job across hosts before owning
a cluster.

Each host is a network, UTS (hostname) and mount namespace of its own, with
a private /dev/shm and /tmp (so the hosts share no memory and no temporary
files; a checkout or Python environment that itself lives under /tmp is
bound into both hosts' /tmp at its path, as a cluster's nodes share their
home directories), its own /etc/hosts naming both, its own /sys (the network devices
it sees) and its own boot id; the hosts are joined by a veth
pair created inside the namespaces (nothing appears in the machine's own
network, and the addresses exist only inside them).  MPICH's launcher starts
the far host's proxy through ``<state>/launch``, which enters that host's
namespaces where ``ssh`` would log into it.

    tools/twohosts.py up                       # needs root (namespaces)
    tools/twohosts.py run -n 4 python examples/allreduce_quickstart.py --ranks 4
    tools/twohosts.py exec node-b ls /dev/shm  # a command on one host
    tools/twohosts.py down                     # ends every process in them

``run`` starts ``mpiexec`` on the first host with both hosts in ``-hosts``
(ranks placed round-robin by blocks of ``--per-host``).  ``down`` kills every
process left in the hosts' namespaces; the namespaces, the veth pair and the
private mounts go with their last process.  Only the standard library: the
test suite imports this module (``Hosts``) for its fixture.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

STATE_ROOT = "/run/tilecomm-twohosts"
NAMES = ("node-a", "node-b")
SUBNET = "10.231.0"                  # private, and only inside the namespaces
LINK = "tc0"                         # the veth end's name on each host
PR_SET_PDEATHSIG = 1

def shared_under_tmp() -> list:
    """The directories right under /tmp that hold what a job runs from here --
    this checkout, the Python environment, the working directory -- bound
    into each host's private /tmp (a clone and its venv under /tmp would
    vanish inside the hosts otherwise)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = set()
    for p in (here, sys.prefix, os.path.realpath(sys.prefix), os.getcwd(),
              os.path.realpath(os.getcwd())):
        if p.startswith("/tmp/"):
            out.add("/tmp/" + p[len("/tmp/"):].split("/")[0])
    return sorted(out)


# run inside each host's fresh namespaces by its keeper process; the keeper
# then sleeps, holding the namespaces for the processes entered into them
KEEPER = r"""
set -e
state=$1
host=$2
shift 2
mount -t tmpfs -o mode=1777,size=2g tilecomm-shm /dev/shm
# the machine's /tmp, kept reachable just long enough to bind back the
# directories under it that the job runs from (the arguments)
mkdir -p "$state/$host.machine-tmp"
mount --bind /tmp "$state/$host.machine-tmp"
mount -t tmpfs -o mode=1777 tilecomm-tmp /tmp
for dir in "$@"; do
    mkdir -p "$dir"
    mount --bind "$state/$host.machine-tmp/${dir#/tmp/}" "$dir"
done
umount "$state/$host.machine-tmp"
set -- "$state" "$host"
mount --bind "$1/etc-hosts" /etc/hosts
# sysfs as this network namespace sees it (/sys/class/net: lo and the link),
# where MPI libraries look for network devices
mount -t sysfs tilecomm-sys /sys
# a boot id of its own: MPI libraries (UCX) take one boot id for one machine
# and would reach the other host's processes through the kernel (shared
# memory, cross-memory attach), never through the link
cat /proc/sys/kernel/random/uuid > "$1/$2.boot_id"
mount --bind "$1/$2.boot_id" /proc/sys/kernel/random/boot_id
hostname "$2"
ip link set lo up
echo $$ > "$1/$2.pid.new" && mv "$1/$2.pid.new" "$1/$2.pid"
exec sleep infinity
"""

# hydra calls this as ``launch [-x] HOST "COMMAND"`` (its ssh launcher's
# arguments); entering the host's namespaces stands for logging into it.  As
# ssh says when a connection drops, it says when the host's side of the job
# (hydra's proxy) was killed -- all of the host's processes gone -- which
# hydra itself reports only as a closed socket.  The proxy dies with it
# (--pdeathsig), as a remote session ends with its ssh.
LAUNCH = r"""#!/bin/sh
# mpiexec's own stderr, held from the start: the report below must not
# depend on mpiexec still reading ours (it ends at once when a host is lost)
exec 3>"/proc/$PPID/fd/2" || exec 3>&2
# mpiexec, ending, signals what it launched: the report comes first (the
# proxy dies with this script in any case, --pdeathsig)
trap '' TERM HUP INT
while [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
setpriv --pdeathsig KILL -- env --default-signal=TERM,HUP,INT \
    nsenter -t "$(cat "%s/$host.pid")" --net --uts --mount --wd="$PWD" -- \
    /bin/sh -c "exec $*" 3>&-
status=$?
if [ $status -gt 128 ]; then
    echo "twohosts: lost $host: its side of the job was killed (signal $((status - 128)))" >&3
fi
exit $status
"""


class Unavailable(RuntimeError):
    """Namespaces cannot be made here (the one-line reason is the message)."""


def why_unavailable() -> str | None:
    """Why two hosts cannot be made on this machine, or None."""
    if os.geteuid() != 0:
        return "two hosts need root (network and mount namespaces)"
    for tool in ("ip", "unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"two hosts need `{tool}` (iproute2 / util-linux), not found on PATH"
    probe = subprocess.run(["unshare", "--net", "--uts", "--mount", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"namespaces are not permitted here: {probe.stderr.strip()}"
    return None


def _is_keeper(pid: int) -> bool:
    """Whether ``pid`` is a live keeper: ``sleep infinity`` in a network
    namespace other than this process's.  What ``down`` kills is found by
    the keeper's namespace, so a recycled pid must never pass for one."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read() != b"sleep\0infinity\0":
                return False
        return os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def sweep_stale() -> None:
    """Remove the state of pairs whose keepers are gone (a tied pair's
    process was killed before it could call ``down``: its keepers died with
    it, and their namespaces with them)."""
    try:
        names = os.listdir(STATE_ROOT)
    except FileNotFoundError:
        return
    for name in names:
        state = os.path.join(STATE_ROOT, name)
        pids = []
        for h in NAMES:
            try:
                with open(os.path.join(state, f"{h}.pid")) as f:
                    pids.append(int(f.read()))
            except (OSError, ValueError):
                pass
        if not any(_is_keeper(p) for p in pids) and \
                time.time() - os.path.getmtime(state) > 60:   # not one being set up now
            shutil.rmtree(state, ignore_errors=True)


def _die_with_parent():
    # the fixture's hosts end with the test session, even a killed one
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Hosts:
    """A pair of simulated hosts, named by ``name`` (the state directory
    ``/run/tilecomm-twohosts/<name>``).  ``up(tied=True)`` ties their life to
    this process (a test session); ``tied=False`` leaves them up after it
    exits (``twohosts.py up``) until ``down``."""

    def __init__(self, name: str = "default"):
        self.name = name
        self.state = os.path.join(STATE_ROOT, name)
        self.names = NAMES
        self.addresses = {h: f"{SUBNET}.{i + 1}" for i, h in enumerate(NAMES)}
        self._keepers = []

    # ---------------------------------------------------------------- up / down
    def up(self, tied: bool = True) -> "Hosts":
        reason = why_unavailable()
        if reason:
            raise Unavailable(reason)
        sweep_stale()
        if os.path.exists(self.state):
            self.down()
        os.makedirs(self.state)
        try:
            self._write_files()
            for h in NAMES:
                self._keepers.append(subprocess.Popen(
                    ["unshare", "--net", "--uts", "--mount", "--propagation", "private",
                     "--fork", "--kill-child", "--", "/bin/sh", "-c", KEEPER, "keeper",
                     self.state, h, *shared_under_tmp()],
                    stdin=subprocess.DEVNULL, start_new_session=not tied,
                    preexec_fn=_die_with_parent if tied else None))
            self._wait_for_keepers()
            a, b = (self.pid(h) for h in NAMES)
            # both ends made inside the namespaces: nothing in the machine's own
            self.exec(NAMES[0], ["ip", "link", "add", LINK, "type", "veth", "peer", "name", LINK,
                                 "netns", str(b)])
            for h in NAMES:
                self.exec(h, ["ip", "addr", "add", f"{self.addresses[h]}/24", "dev", LINK])
                self.exec(h, ["ip", "link", "set", LINK, "up"])
            self.wait_link(True)
        except BaseException:
            self.down()
            raise
        return self

    def _write_files(self):
        with open(os.path.join(self.state, "etc-hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n")
            f.writelines(f"{ip} {h}\n" for h, ip in self.addresses.items())
        launch = os.path.join(self.state, "launch")
        with open(launch, "w") as f:
            f.write(LAUNCH % self.state)
        os.chmod(launch, 0o755)

    def _wait_for_keepers(self, timeout: float = 10.0):
        deadline = time.monotonic() + timeout
        while not all(os.path.exists(os.path.join(self.state, f"{h}.pid")) for h in NAMES):
            dead = [k for k in self._keepers if k.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise Unavailable(f"a host's namespaces could not be set up (keeper exit "
                                  f"{[k.returncode for k in dead]})")
            time.sleep(0.01)

    def down(self) -> None:
        """Kill every process in the hosts' namespaces (their keepers last)
        and remove the state directory; the namespaces, the veth pair and
        the private /dev/shm and /tmp go with their last process."""
        for h in NAMES:
            try:
                pid = self.pid(h)
            except (OSError, ValueError):
                continue
            if not _is_keeper(pid):
                continue            # gone (its pid may be another process's now)
            # the unshare first: its --kill-child takes the keeper quietly
            for p in [self._maker(pid)] + self.processes(h, pid) + [pid]:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for k in self._keepers:
            k.kill()
            k.wait()
        self._keepers = []
        deadline = time.monotonic() + 5.0
        while any(self.processes(h) for h in NAMES if self._alive(h)) and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(self.state, ignore_errors=True)
        try:
            os.rmdir(STATE_ROOT)        # the last pair gone: nothing of ours is left in /run
        except OSError:
            pass

    def _alive(self, host: str) -> bool:
        try:
            return os.path.exists(f"/proc/{self.pid(host)}")
        except (OSError, ValueError):
            return False

    # ---------------------------------------------------------------- queries
    def pid(self, host: str) -> int:
        """The keeper's pid: the process that holds ``host``'s namespaces."""
        with open(os.path.join(self.state, f"{host}.pid")) as f:
            return int(f.read())

    def processes(self, host: str, keeper: int | None = None) -> list:
        """Pids of the live processes in ``host``'s network namespace (its
        keeper and the ``unshare`` that made it left out)."""
        keeper = self.pid(host) if keeper is None else keeper
        if not _is_keeper(keeper):
            return []
        maker = self._maker(keeper)
        try:
            ns = os.readlink(f"/proc/{keeper}/ns/net")
        except OSError:
            return []
        pids = []
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) not in (keeper, maker):
                try:
                    if os.readlink(f"/proc/{p}/ns/net") == ns:
                        pids.append(int(p))
                except OSError:
                    pass
        return pids

    def path(self, host: str, path: str) -> str:
        """``path`` as ``host`` sees it (its /dev/shm, its /tmp)."""
        return f"/proc/{self.pid(host)}/root{path}"

    def leftovers(self, host: str) -> list:
        """What is in ``host``'s private /dev/shm and /tmp (both start empty,
        but for the directories bound in: ``shared_under_tmp``)."""
        shared = set(shared_under_tmp())
        return sorted(f"{d}/{f}" for d in ("/dev/shm", "/tmp")
                      for f in os.listdir(self.path(host, d)) if f"{d}/{f}" not in shared)

    @staticmethod
    def _maker(keeper: int) -> int:
        """The keeper's parent: the ``unshare`` that made the namespaces."""
        try:
            with open(f"/proc/{keeper}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return keeper

    # ---------------------------------------------------------------- commands
    def command(self, host: str, argv: list) -> list:
        """``argv`` run inside ``host``."""
        # --wd: entering a mount namespace would leave the command in /
        return ["nsenter", "-t", str(self.pid(host)), "--net", "--uts", "--mount",
                f"--wd={os.getcwd()}", "--", *argv]

    def exec(self, host: str, argv: list) -> None:
        subprocess.run(self.command(host, argv), check=True, stdin=subprocess.DEVNULL)

    def mpiexec(self, mpiexec: str, n: int, per_host: int, argv: list,
                options: tuple = ()) -> list:
        """The command that runs ``mpiexec -n n argv`` from the first host,
        ``per_host`` processes a host in turn (ranks 0..per_host-1 on the
        first)."""
        hosts = ",".join(f"{h}:{per_host}" for h in NAMES)
        return self.command(NAMES[0], [mpiexec, "-launcher", "ssh", "-launcher-exec",
                                       os.path.join(self.state, "launch"), "-hosts", hosts,
                                       "-n", str(n), *options, *argv])

    def set_link(self, host: str, up: bool) -> None:
        """Take ``host``'s end of the link down (or up again)."""
        self.exec(host, ["ip", "link", "set", LINK, "up" if up else "down"])

    def wait_link(self, up: bool, timeout: float = 10.0) -> None:
        """Until both ends of the link are up (or not): a job started before
        the carrier is up finds no route to the other host."""
        want = "up" if up else "down"
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for h in NAMES:
                with open(self.path(h, f"/sys/class/net/{LINK}/operstate")) as f:
                    states.append(f.read().strip())
            if all(s == want for s in states):
                return
            if time.monotonic() > deadline:
                raise Unavailable(f"the link between the hosts is not {want}: {states}")
            time.sleep(0.02)


def _mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.access(here, os.X_OK) else (shutil.which("mpiexec") or "mpiexec")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="default", help="which pair (several may be up)")
    sub = ap.add_subparsers(dest="verb", required=True)
    sub.add_parser("up", help="make the two hosts (they stay up until `down`)")
    sub.add_parser("down", help="end every process in them and remove them")
    sub.add_parser("status", help="the hosts, their addresses and processes")
    run = sub.add_parser("run", help="mpiexec across the hosts, from the first one")
    run.add_argument("-n", type=int, default=2, help="processes in all")
    run.add_argument("--per-host", type=int, default=None,
                     help="processes a host (default: n / 2, at least 1)")
    run.add_argument("command", nargs=argparse.REMAINDER)
    ex = sub.add_parser("exec", help="a command on one host")
    ex.add_argument("host", choices=NAMES)
    ex.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    hosts = Hosts(args.name)
    if args.verb == "up":
        try:
            hosts.up(tied=False)
        except Unavailable as e:
            print(f"twohosts: {e}", file=sys.stderr)
            return 2
        print(f"up: {', '.join(f'{h} {ip}' for h, ip in hosts.addresses.items())} "
              f"(state in {hosts.state})")
        return 0
    if args.verb == "down":
        hosts.down()
        return 0
    if not os.path.exists(hosts.state):
        print(f"twohosts: no hosts named {args.name!r} are up (tools/twohosts.py up)",
              file=sys.stderr)
        return 2
    if args.verb == "status":
        print(json.dumps({h: {"address": hosts.addresses[h], "keeper": hosts.pid(h),
                              "processes": hosts.processes(h)} for h in NAMES}, indent=1))
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run")
    if args.verb == "exec":
        return subprocess.call(hosts.command(args.host, command))
    per_host = args.per_host or max(1, args.n // len(NAMES))
    return subprocess.call(hosts.mpiexec(_mpiexec(), args.n, per_host, command))


if __name__ == "__main__":
    sys.exit(main())
