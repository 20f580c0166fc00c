"""A command run under `strace` in a network namespace of its own, and what its trace shows: the network
connections and name lookups it tried, and the paths it created (files, folders, links, Unix sockets).

`strace -ff -y` writes one file per process (so no call is split across lines) and prints the path behind each
file descriptor (`AT_FDCWD</cwd>`, `= 3</created/file>`), so relative paths resolve without guessing.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

TRACED = ("connect,sendto,sendmsg,bind,open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,"
          "symlink,symlinkat,link,linkat")
CALL = re.compile(r"^(?P<call>\w+)\((?P<args>.*)\)\s+= (?P<result>-?\d+)(?:<(?P<fd_path>[^>]*)>)?")
PATH_ARGUMENT = re.compile(r'(?:\w+<(?P<folder>[^>]*)>, )?"(?P<path>[^"]*)"')
INET = re.compile(r'sa_family=AF_INET6?, .*?(?:inet_addr|inet_pton)\((?:AF_INET6?, )?"(?P<address>[^"]+)"')
NAME_LOOKUP = ("/etc/resolv.conf", "/var/run/nscd/socket", "/run/nscd/socket")  # glibc's and Go's resolvers


def unavailable() -> str | None:
    """Why a command cannot be traced here (no strace, ptrace refused, no network namespace), or None."""
    if shutil.which("strace") is None:
        return "strace is not installed (apt-get install strace)"
    if not works(["strace", "-o", os.devnull, "true"]):
        return "strace cannot trace here (ptrace is not permitted)"
    if namespace() is None:
        return "no network namespace: `unshare -n` and `unshare -rn` both failed"
    return None


def works(command: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(command), capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def namespace() -> list[str] | None:
    """The `unshare` prefix that runs a command without network (as root, or in a user namespace), or None."""
    if shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        if works([*prefix, "true"]):
            return prefix
    return None


def traced(command: Sequence[str], folder: Path) -> list[str]:
    """`command` without network, under strace writing one trace per process into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    prefix = namespace()
    assert prefix is not None, unavailable()
    return [*prefix, "strace", "-f", "-ff", "-qq", "-y", "-e", "signal=none", "-e", f"trace={TRACED}",
            "-o", str(folder / "trace"), *command]


def trace_lines(folder: Path) -> list[str]:
    """The calls of every traced process (each file `trace.<pid>`)."""
    return [line for path in sorted(folder.glob("trace.*")) for line in path.read_text(errors="replace").splitlines()]


def network_attempts(lines: Sequence[str]) -> list[str]:
    """The calls that tried the network: a connection or datagram to an address that is not the loopback, or a
    name lookup (reading the resolver's configuration, asking nscd)."""
    tried = []
    for line in lines:
        match = CALL.match(line)
        if match is None:
            continue
        call, args = match["call"], match["args"]
        address = INET.search(args) if call in ("connect", "sendto", "sendmsg") else None
        if address and not ipaddress.ip_address(address["address"]).is_loopback:
            tried.append(line)
        elif any(f'"{name}"' in args for name in NAME_LOOKUP):
            tried.append(line)
    return tried


def created_paths(lines: Sequence[str], cwd: Path) -> list[tuple[str, Path]]:
    """(call, absolute path) of everything the traced processes created: files opened with O_CREAT, folders,
    links, rename targets, Unix sockets bound to a path; failed calls left out. A relative path given without a
    descriptor is taken from `cwd`, the folder the command ran in."""
    created = []
    for line in lines:
        match = CALL.match(line)
        if match is None or int(match["result"]) < 0:
            continue
        call, args = match["call"], match["args"]
        if call in ("open", "openat", "creat") and (call == "creat" or "O_CREAT" in args):
            created.append((call, Path(match["fd_path"]) if match["fd_path"] else last_path(args, cwd)))
        elif call in ("mkdir", "mkdirat", "symlink", "symlinkat", "rename", "renameat", "renameat2", "link",
                      "linkat"):
            created.append((call, last_path(args, cwd)))
        elif call == "bind" and 'sun_path="' in args:
            created.append((call, cwd / args.split('sun_path="', 1)[1].split('"', 1)[0]))
    return created


def last_path(args: str, cwd: Path) -> Path:
    """The last path argument of a call, resolved against the folder of the descriptor before it (`AT_FDCWD</x>`),
    else against `cwd`."""
    *_, match = PATH_ARGUMENT.finditer(args)
    return Path(match["folder"] or cwd, match["path"])


def outside(paths: Sequence[tuple[str, Path]], *folders: Path) -> list[tuple[str, Path]]:
    """The created paths that are in none of `folders`."""
    return [(call, path) for call, path in paths if not any(path.is_relative_to(folder) for folder in folders)]
