"""Benchmark support: run a command and watch its whole process tree (memory, lifetime).

Memory is sampled from ``/proc`` every ``period_s`` over the command and all its descendants
(children of children included, whatever session or process group they moved to). Two sums:

* **RSS**: resident pages of every process added up. Pages shared between processes (a forked
  child's copy-on-write pages, shared libraries) are counted once per process, so this
  over-states a forked tree; it is the figure ``ps`` and ``top`` users add up.
* **PSS**: each shared page divided among the processes sharing it (``smaps_rollup``), the
  tree's real share of the machine's memory. Read every fifth sample and at every new RSS
  peak: it costs ten times what RSS does, and the sampler shares its interpreter with the
  benchmark's model server.

A child that runs in its parent's address space (``subprocess`` vforks, and the child is
sampled before its exec) is left out of both sums: it would show the parent's whole memory a
second time (detected with ``kcmp(KCMP_VM)``).

The peaks of both are reported; the peak is only as good as the sampling period.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


_SYS_KCMP = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)
_KCMP_VM = 1
_libc = ctypes.CDLL(None, use_errno=True)


def shares_memory(pid: int, other: int) -> bool:
    """True when ``pid`` runs in ``other``'s address space (a vfork child before its exec).

    Such a child shows its parent's whole RSS and PSS; summing both would count them twice.
    """
    if _SYS_KCMP is None:
        return False
    return _libc.syscall(_SYS_KCMP, pid, other, _KCMP_VM, 0, 0) == 0


_PER_TASK_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")
"""Whether this kernel lists each thread's children (CONFIG_PROC_CHILDREN); else the tree is
found by reading every process's parent."""


def _children_of(pid: int) -> list[int]:
    """The children of ``pid``'s threads, from ``/proc/<pid>/task/<tid>/children``."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            kids += [int(k) for k in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return kids


def tree(root: int) -> list[int]:
    """``root`` and every live descendant with an address space of its own.

    Walks down from ``root`` through the per-thread children lists, so a sample reads the
    tree's own processes, not the parent of every process on the machine (7 ms a sample with
    150 processes, on the benchmark's own interpreter, beside the model server it hosts).
    """
    if not _PER_TASK_CHILDREN:
        children = _children_map()
        out, todo = [], [root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return [p for p in out if p == root or not shares_memory(p, _parent(p))]
    out, walk = [root], [root]
    while walk:
        parent = walk.pop()
        for child in _children_of(parent):
            if not shares_memory(child, parent):
                out.append(child)
            walk.append(child)  # a vfork child's own children still count
    return out


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _name(pid: int) -> str:
    """A short program name: the script or module for Python, else the executable's name."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return "?"
    if Path(words[0]).name.startswith("python") and len(words) > 1:
        rest = words[1:]
        while len(rest) > 1 and rest[0].startswith("-") and rest[0] != "-m":
            rest = rest[2:] if rest[0] in ("-X", "-W") and len(rest) > 2 else rest[1:]  # interpreter flags
        if rest[0] == "-m" and len(rest) > 1:
            return rest[1]
        return Path(rest[0]).name
    return Path(words[0]).name


class Periodic:
    """``sample()`` every ``period_s`` on a thread between ``start()`` and ``stop()``.

    A subclass (a dataclass) declares ``period_s``, ``_stop`` (an Event) and ``_thread``.
    """

    period_s: float
    _stop: threading.Event
    _thread: threading.Thread | None

    def sample(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.sample()

        self._thread = threading.Thread(target=loop, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass
class TreeWatch(Periodic):
    """Peaks of the process tree under ``root`` while it runs."""

    root: int
    also: tuple[int, ...] = ()
    """Further processes counted with their trees: a warm spare the command takes is not its child."""
    period_s: float = 0.2
    pss_every: int = 5
    """PSS (``smaps_rollup``, about 0.5 ms a process) is read every this many samples, and at
    every new RSS peak; RSS (``statm``) at every sample."""
    peak_rss: int = 0
    peak_pss: int = 0
    peak_processes: int = 0
    peak_breakdown: dict[str, float] = field(default_factory=dict)
    """RSS in MB by program name at the RSS peak."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _samples: int = 0

    def sample(self) -> None:
        pids = list(dict.fromkeys(p for r in (self.root, *self.also) for p in tree(r)))
        self.peak_processes = max(self.peak_processes, len(pids))
        rss = {p: _rss(p) for p in pids}
        self._samples += 1
        pss_now = self._samples % self.pss_every == 1 % self.pss_every
        if sum(rss.values()) > self.peak_rss:
            pss_now = True
            self.peak_rss = sum(rss.values())
            breakdown: dict[str, float] = {}
            for pid, size in rss.items():
                name = _name(pid)
                breakdown[name] = breakdown.get(name, 0.0) + size / (1024 * 1024)
            self.peak_breakdown = breakdown
        if pss_now:
            self.peak_pss = max(self.peak_pss, sum(_pss(p) for p in pids))


@dataclass(frozen=True)
class Finished:
    """A command that ran to its end under a :class:`TreeWatch`."""

    started: float
    """``time.time()`` just before the command was started."""
    wall_s: float
    returncode: int
    stdout: str
    stderr: str
    peak_rss_mb: float
    peak_pss_mb: float
    peak_processes: int
    peak_breakdown: dict[str, float]
    """RSS in MB by program name at the RSS peak."""


def run_watched(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 3600,
    also: Sequence[int] = (),
) -> Finished:
    """Run ``argv`` to its end, sampling its process tree (and the trees of ``also``); wall time
    from just before the start."""
    started = time.time()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        env=dict(env) if env is not None else None,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    watch = TreeWatch(proc.pid, tuple(also)).start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        wall = time.monotonic() - t0  # not the sampler's last sample, which stop() waits for
    finally:
        watch.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    mb = 1024 * 1024
    return Finished(
        started=started,
        wall_s=wall,
        returncode=proc.returncode,
        stdout=stdout,
        stderr=stderr,
        peak_rss_mb=watch.peak_rss / mb,
        peak_pss_mb=watch.peak_pss / mb,
        peak_processes=watch.peak_processes,
        peak_breakdown=watch.peak_breakdown,
    )


def processes_with(argument: str) -> list[int]:
    """Live processes with ``argument`` in their command line (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(argument.encode() in w for w in words):
            found.append(int(entry.name))
    return found
