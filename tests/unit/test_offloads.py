"""Offloads turned off in-process (guest/offloads.py): the request's layout,
and, where this machine lets a test make a network namespace (root), the
same features as `ethtool -K` turns off, on a real veth."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tortoiselab.guest import offloads as O

SRC = Path(__file__).resolve().parents[2] / "src"


def test_keywords_stand_for_ethtools_features():
    names = ["tx-scatter-gather", "tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp6-segmentation",
             "tx-generic-segmentation", "rx-gro", "rx-gro-hw", "tx-udp-segmentation", "tx-gre-segmentation"]
    assert O.feature_bits(names, ("tso", "gso", "gro")) == [1, 2, 3, 4, 5]
    assert O.feature_bits(names, ("gro",)) == [5]


def test_sfeatures_changes_only_the_named_bits_to_off():
    req = O.sfeatures_request(40, [1, 33])
    cmd, blocks, *words = struct.unpack(f"=II{len(req) // 4 - 2}I", req)
    assert (cmd, blocks) == (O.ETHTOOL_SFEATURES, 2)
    assert words == [1 << 1, 0, 1 << 1, 0]  # (valid, requested) per 32 features


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ethtool") or not shutil.which("unshare"),
                    reason="needs root, ethtool and unshare for a network namespace of its own")
def test_same_features_as_ethtool_on_a_veth():
    script = f"""set -e
ip link add a0 type veth peer name b0
ip link add a1 type veth peer name b1
ethtool -K a0 tso off gso off gro off
PYTHONPATH={SRC} {sys.executable} -c "from tortoiselab.guest.offloads import offloads_off; offloads_off('a1')"
ethtool -k a0 | tail -n +2 > /dev/shm/.offl-$$-0
ethtool -k a1 | tail -n +2 > /dev/shm/.offl-$$-1
cat /dev/shm/.offl-$$-0; echo ===; cat /dev/shm/.offl-$$-1; rm -f /dev/shm/.offl-$$-*
"""
    out = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, check=True).stdout
    by_ethtool, ours = out.split("===\n")
    assert "generic-receive-offload: off" in ours and "tcp-segmentation-offload: off" in ours
    assert ours == by_ethtool
