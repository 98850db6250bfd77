"""Segmentation and receive offloads turned off from this process, through
the kernel's ethtool ioctl (SIOCETHTOOL), instead of an `ethtool -K`
process per interface (a process costs milliseconds of wall time in the
lab guest: docs/speed.md, "The topology phase").

What `ethtool -K DEV tso off gso off gro off` does (ethtool 6.1): it turns
off every feature whose name its legacy keyword stands for (`tso`: the
pattern `tx-tcp*-segmentation`; `gso`: `tx-generic-segmentation`; `gro`:
`rx-gro`), in one request. Here the same features are looked up by name in
the device's feature-name table (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS of
ETH_SS_FEATURES) and cleared in one ETHTOOL_SFEATURES request, so the
kernel changes the device's features once, as for ethtool's request.
Layouts: include/uapi/linux/ethtool.h (struct ethtool_sset_info,
ethtool_gstrings, ethtool_sfeatures) and struct ifreq.
"""

from __future__ import annotations

import ctypes
import fcntl
import fnmatch
import socket
import struct

SIOCETHTOOL = 0x8946
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSSET_INFO = 0x37
ETHTOOL_SFEATURES = 0x3B
ETH_SS_FEATURES = 4
ETH_GSTRING_LEN = 32
IFNAMSIZ = 16
IFREQ_BYTES = 40  # struct ifreq on 64-bit Linux
# ethtool's legacy keywords, by the feature names they stand for (ethtool's off_flag_def)
KEYWORDS = {"tso": "tx-tcp*-segmentation", "gso": "tx-generic-segmentation", "gro": "rx-gro"}


def feature_bits(names: list[str], keywords: tuple[str, ...]) -> list[int]:
    """The indices in a device's feature-name table of the features the
    keywords (KEYWORDS) stand for."""
    patterns = [KEYWORDS[k] for k in keywords]
    return [i for i, n in enumerate(names) if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def sfeatures_request(n_features: int, off_bits: list[int]) -> bytes:
    """struct ethtool_sfeatures turning the off_bits features off and
    leaving every other one as it is (valid: which to change; requested:
    their new values, all 0)."""
    blocks = (n_features + 31) // 32
    valid = [0] * blocks
    for b in off_bits:
        valid[b // 32] |= 1 << (b % 32)
    return struct.pack(f"=II{2 * blocks}I", ETHTOOL_SFEATURES, blocks,
                       *[v for pair in zip(valid, [0] * blocks) for v in pair])


def _ioctl(sock: socket.socket, dev: str, request: bytes) -> bytes:
    """One SIOCETHTOOL call on dev with request as its ethtool buffer;
    returns the buffer as the kernel left it. OSError if it refused."""
    buf = ctypes.create_string_buffer(request, len(request))
    ifr = struct.pack(f"={IFNAMSIZ}sQ", dev.encode(), ctypes.addressof(buf)).ljust(IFREQ_BYTES, b"\0")
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifr)
    return buf.raw


def feature_names(sock: socket.socket, dev: str) -> list[str]:
    """The device's feature-name table (ETH_SS_FEATURES), in bit order."""
    info = _ioctl(sock, dev, struct.pack("=IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_FEATURES, 0))
    count = struct.unpack_from("=I", info, 16)[0]
    raw = _ioctl(sock, dev, struct.pack("=III", ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count)
                 + bytes(count * ETH_GSTRING_LEN))
    return [raw[12 + i * ETH_GSTRING_LEN: 12 + (i + 1) * ETH_GSTRING_LEN].split(b"\0", 1)[0].decode()
            for i in range(count)]


def offloads_off(dev: str, keywords: tuple[str, ...] = ("tso", "gso", "gro")) -> None:
    """`ethtool -K dev tso off gso off gro off` (or the keywords given) done
    in this process, in the network namespace this thread is in (the
    executor's netns_of). OSError if the kernel refuses."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        names = feature_names(sock, dev)
        _ioctl(sock, dev, sfeatures_request(len(names), feature_bits(names, keywords)))
