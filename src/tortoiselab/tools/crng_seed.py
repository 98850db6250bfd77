"""Seed the UML guest's kernel CRNG from the run's seed.

    python -S crng_seed.py REQUEST_JSON

Run by the guest's init, as root, before any program draws a random number.
The lab kernel has no source of host entropy (no UML hw_random, and the
host's getrandom fails for it: `no_host_entropy.py`), so until now its
input pool holds only what every boot of the same run gives it: the command
line, the kernel's name and virtual times. RNDADDENTROPY (random(4)) mixes
in 64 bytes derived from the run's seed and credits them, which makes the
CRNG ready at once: every kernel random number of the run (ports, initial
sequence numbers, hash seeds, the random delays of kernel timers) and every
getrandom() of a program in the guest follows the run's seed
(docs/determinism.md). Imports nothing that draws a random number itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import struct
import sys

RNDADDENTROPY = 0x40085203  # _IOW('R', 0x03, int[2])


def seed_bytes(seed: int) -> bytes:
    """64 bytes: SHA-512 of a label and the run's seed."""
    return hashlib.sha512(f"tortoiselab guest crng {seed}".encode()).digest()


def rand_pool_info(data: bytes) -> bytes:
    """struct rand_pool_info {int entropy_count; int buf_size; __u32 buf[];}:
    entropy_count in bits, buf_size in bytes."""
    return struct.pack("ii", len(data) * 8, len(data)) + data


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: crng_seed.py REQUEST_JSON", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        seed = int(json.load(fh).get("seed", 1))
    with open("/dev/random", "wb", buffering=0) as dev:
        fcntl.ioctl(dev, RNDADDENTROPY, rand_pool_info(seed_bytes(seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
