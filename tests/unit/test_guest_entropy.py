"""The guest's randomness follows the run (docs/determinism.md): the host's
getrandom fails for the lab kernel (a real seccomp filter, tried on a real
process here), and the guest seeds its CRNG from the run's seed."""

import struct
import subprocess
import sys

import pytest

from tortoiselab.tools import crng_seed, no_host_entropy

PROBE = "import os\ntry:\n    os.getrandom(8)\n    print('got')\nexcept OSError as e:\n    print(e.errno)\n"


@pytest.mark.skipif(not no_host_entropy.platform.machine() == "x86_64", reason="the filter is for x86-64")
def test_getrandom_fails_with_enosys_under_the_filter_and_other_calls_work():
    p = subprocess.run([sys.executable, "-S", no_host_entropy.__file__, sys.executable, "-S", "-c",
                        PROBE + "print(len(os.listdir('/')) > 0, os.getpid() > 0)"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["38", "True", "True"]  # ENOSYS; the rest of the system still answers
    plain = subprocess.run([sys.executable, "-S", "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert plain.stdout.strip() == "got"  # and without the filter it works: the test can fail


def test_filter_program_shape():
    code = no_host_entropy.program()
    assert len(code) % 8 == 0
    insns = [struct.unpack("=HBBI", code[i:i + 8]) for i in range(0, len(code), 8)]
    assert insns[-1][3] == no_host_entropy.SECCOMP_RET_ALLOW  # anything not matched is allowed
    assert (no_host_entropy.RET_K, 0, 0, no_host_entropy.SECCOMP_RET_ERRNO | 38) in insns


def test_wrapper_without_a_program_says_how_to_use_it():
    p = subprocess.run([sys.executable, "-S", no_host_entropy.__file__], capture_output=True, text=True)
    assert p.returncode == 2 and "no_host_entropy.py PROGRAM" in p.stderr


def test_crng_seed_is_the_runs_and_credits_every_bit():
    a, b = crng_seed.seed_bytes(7), crng_seed.seed_bytes(8)
    assert a == crng_seed.seed_bytes(7) and a != b and len(a) == 64
    info = crng_seed.rand_pool_info(a)
    assert struct.unpack("ii", info[:8]) == (512, 64) and info[8:] == a
