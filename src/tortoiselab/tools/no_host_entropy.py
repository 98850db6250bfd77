"""Run a program with the host's getrandom(2) failing for it (ENOSYS).

    python -S no_host_entropy.py PROGRAM [ARG...]

The UML lab kernel asks the host for random bytes twice over: at boot
(`add_bootloader_randomness`) and at every reseed of its CRNG (UML's
`arch_get_random_longs` is the host's getrandom). Either way the guest's
kernel random numbers differed from boot to boot, whatever the run's seed.
With getrandom failing, the kernel takes what it takes when a CPU has no
random instruction: nothing. The guest then seeds its CRNG from the run
(`crng_seed.py`), and every kernel draw follows the run (docs/determinism.md).

A seccomp filter (prctl NO_NEW_PRIVS first: no root needed) that returns
ENOSYS for getrandom on x86-64 and allows everything else, then exec: the
program keeps this process's pid. The guest's own processes are host
processes whose system calls the guest kernel handles. In UML's ptrace mode
the filter never sees them (ptrace's SYSEMU stops a call before seccomp
would). In its seccomp mode (UML 7.x, `seccomp=on`) each guest process runs
under UML's own filter as well, which traps every call made outside UML's
stub (SECCOMP_RET_TRAP); the host takes the most severe action of all the
filters, and TRAP outranks this filter's ERRNO, so a guest's getrandom still
goes to the guest kernel.
Only x86-64 (the lab kernel's only architecture); elsewhere it refuses.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
AUDIT_ARCH_X86_64 = 0xC000003E
NR_GETRANDOM_X86_64 = 318
ENOSYS = 38
# classic BPF opcodes: BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
# struct seccomp_data: int nr; __u32 arch; ...
OFF_NR, OFF_ARCH = 0, 4


def program() -> bytes:
    """The filter, as struct sock_filter {u16 code; u8 jt, jf; u32 k}[]."""
    insns = [
        (LD_W_ABS, 0, 0, OFF_ARCH),
        (JEQ_K, 0, 3, AUDIT_ARCH_X86_64),  # another ABI (x32 aside, none here): allow
        (LD_W_ABS, 0, 0, OFF_NR),
        (JEQ_K, 0, 1, NR_GETRANDOM_X86_64),
        (RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS),
        (RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *i) for i in insns)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    if platform.machine() != "x86_64":
        raise OSError(f"no_host_entropy: only for x86-64 hosts, not {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    code = program()
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


ADDR_NO_RANDOMIZE = 0x0040000


def no_aslr() -> None:
    """The program's address space laid out the same in every start
    (personality ADDR_NO_RANDOMIZE, as `setarch -R`): the lab kernel is a
    host program whose libraries and stack the host places at random, and
    where an interrupt finds it goes into the guest's random pool."""
    libc = ctypes.CDLL(None, use_errno=True)
    cur = libc.personality(0xFFFFFFFF)
    if cur == -1 or libc.personality(cur | ADDR_NO_RANDOMIZE) == -1:
        raise OSError(ctypes.get_errno(), "personality(ADDR_NO_RANDOMIZE)")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    no_aslr()
    install()
    os.execv(argv[0], argv)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
