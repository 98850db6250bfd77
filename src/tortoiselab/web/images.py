"""Valid PNG and JPEG files of an exact byte size, drawn from a seeded
`random.Random` (the site's `.png` and `.jpg` objects, web/pages.py).

A browser decodes an image as its bytes arrive and stops reading one it
finds invalid (Chromium read ~16 KB of the site's random-byte images, so
its page loads were partial: docs/browser.md). Each file here is a small
real picture whose decoder must read every byte before it reaches the
pixels: the padding that makes up the exact size sits in metadata placed
before the image data, which decoders skip by its length.

Both encoders are written from the specifications and use no encoder
library, so the bytes are the same on any machine (an encoder's output
moves with its version); zlib is used only for its checksums (CRC-32,
Adler-32), which are fixed functions.

- PNG (ISO/IEC 15948 = W3C PNG 2nd ed.; RFC 2083): signature, IHDR
  (PNG_WIDTH x PNG_HEIGHT, 8-bit RGB), the padding in one or more `toRt`
  chunks (ancillary, private, safe to copy: the case of each letter is a
  property bit, §5.4), IDAT (a zlib stream, RFC 1950, of stored deflate
  blocks, RFC 1951 §3.2.4: no compression, so no compressor's choices),
  IEND.
- JPEG (ITU-T T.81 baseline, JFIF 1.02): SOI, APP0 "JFIF", the padding in
  APP15 segments ("TortoiseLab\\0" then seeded bytes, each at most 65,535
  bytes with its length field, B.2.4.6), DQT, SOF0 (JPEG_WIDTH x
  JPEG_HEIGHT, YCbCr, no subsampling), DHT (the Annex K tables K.3-K.6),
  SOS, the entropy-coded blocks, EOI. Every 8x8 block is one colour: only
  its DC coefficient is coded (AC: end of block), with a DC quantiser of 8,
  so an exact IDCT gives back the drawn Y, Cb, Cr of each block.

`encode(ext, n_bytes, rng)` returns the file and the pixels a decoder must
give back; a size below the smallest such file is a ValueError.
"""

from __future__ import annotations

import random
import struct
import zlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Image:
    """An encoded image: `data` (the file), its size in pixels, and
    `pixels`, row by row, one tuple per pixel, as a decoder returns them in
    `mode` (Pillow's name: "RGB" for the PNG, "YCbCr" for the JPEG, whose
    samples are exact before the colour conversion)."""

    data: bytes
    width: int
    height: int
    mode: str
    pixels: tuple[tuple[int, int, int], ...]


def split_sizes(total: int, lo: int, hi: int) -> list[int]:
    """`total` bytes as the fewest parts of lo..hi bytes each, as equal as
    can be, largest first; ValueError when it cannot be done."""
    k = max(1, -(-total // hi))
    if total < k * lo:
        raise ValueError(f"{total} bytes cannot be split into parts of {lo}-{hi} bytes")
    q, r = divmod(total, k)
    return [q + 1] * r + [q] * (k - r)


def _too_small(kind: str, n_bytes: int, smallest: int) -> ValueError:
    return ValueError(f"{kind}: {n_bytes} bytes is below the smallest file this encoder writes "
                      f"({smallest} bytes); give a size of at least {smallest}")


# --- PNG ------------------------------------------------------------------
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_WIDTH, PNG_HEIGHT = 4, 3  # small enough for the site's smallest object (200 bytes)
# ancillary (t), private (o), reserved bit clear (R), safe to copy (t)
PNG_PAD_CHUNK = b"toRt"
# data bytes per padding chunk; libpng refuses by default an ancillary chunk
# of more than 8,000,000 bytes (PNG_USER_CHUNK_MALLOC_MAX in pnglibconf.h)
PNG_PAD_CHUNK_MAX = 1_000_000
PNG_CHUNK_OVERHEAD = 12  # length, type, CRC


def png_chunk(kind: bytes, data: bytes) -> bytes:
    """One chunk: length, type, data, CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def zlib_stored(raw: bytes) -> bytes:
    """A zlib stream (RFC 1950) holding `raw` in stored deflate blocks (RFC
    1951 §3.2.4: a byte with BFINAL and BTYPE 00, LEN, NLEN, the bytes)."""
    out = bytearray(b"\x78\x01")  # deflate, 32 KB window; 0x7801 is a multiple of 31
    blocks = [raw[i:i + 65535] for i in range(0, len(raw), 65535)] or [b""]
    for i, block in enumerate(blocks):
        out += bytes([int(i == len(blocks) - 1)]) + struct.pack("<HH", len(block), len(block) ^ 0xFFFF) + block
    return bytes(out + struct.pack(">I", zlib.adler32(raw)))


def png(n_bytes: int, rng: random.Random) -> Image:
    """A PNG of exactly n_bytes: PNG_WIDTH x PNG_HEIGHT seeded RGB pixels,
    the rest in PNG_PAD_CHUNK chunks before IDAT."""
    w, h = PNG_WIDTH, PNG_HEIGHT
    rgb = rng.randbytes(w * h * 3)
    pixels = tuple(tuple(rgb[i:i + 3]) for i in range(0, len(rgb), 3))
    rows = b"".join(b"\x00" + rgb[y * w * 3:(y + 1) * w * 3] for y in range(h))  # filter type 0 per row
    head = PNG_SIGNATURE + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    tail = png_chunk(b"IDAT", zlib_stored(rows)) + png_chunk(b"IEND", b"")
    room = n_bytes - len(head) - len(tail)
    if room < PNG_CHUNK_OVERHEAD:
        raise _too_small("png", n_bytes, len(head) + len(tail) + PNG_CHUNK_OVERHEAD)
    pads = [png_chunk(PNG_PAD_CHUNK, rng.randbytes(k - PNG_CHUNK_OVERHEAD))
            for k in split_sizes(room, PNG_CHUNK_OVERHEAD, PNG_CHUNK_OVERHEAD + PNG_PAD_CHUNK_MAX)]
    data = head + b"".join(pads) + tail
    assert len(data) == n_bytes, (len(data), n_bytes)
    return Image(data, w, h, "RGB", pixels)


# --- JPEG -----------------------------------------------------------------
JPEG_WIDTH, JPEG_HEIGHT = 64, 48  # 8 x 6 blocks
JPEG_PAD_MARKER = 0xEF  # APP15
JPEG_PAD_ID = b"TortoiseLab\x00"
JPEG_SEGMENT_MAX = 65535  # a marker segment's length field, itself included
DC_QUANT = 8  # DC-only block of quantised DC q: every sample q * 8 / 8 + 128 (A.3.3)

# Annex K, K.3.3: number of codes of each length 1..16 (BITS) and the
# symbols in order of code (HUFFVAL). DC: luminance K.3, chrominance K.4.
DC_BITS = ((0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0), (0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0))
DC_VALS = (tuple(range(12)), tuple(range(12)))
# AC: luminance K.5, chrominance K.6. The symbols of codes shorter than 16
# bits are listed; the 16-bit codes take every other symbol (run 0-15, size
# 1-10, EOB 0x00, ZRL 0xF0) in increasing order, as both tables list them.
AC_BITS = ((0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7D), (0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77))
AC_HEADS = (
    (0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
     0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xA1, 0x08, 0x23, 0x42, 0xB1, 0xC1, 0x15, 0x52, 0xD1, 0xF0,
     0x24, 0x33, 0x62, 0x72, 0x82),
    (0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
     0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xA1, 0xB1, 0xC1, 0x09, 0x23, 0x33, 0x52, 0xF0,
     0x15, 0x62, 0x72, 0xD1, 0x0A, 0x16, 0x24, 0x34, 0xE1, 0x25, 0xF1),
)


def ac_vals(table: int) -> tuple[int, ...]:
    """HUFFVAL of AC table 0 (luminance) or 1 (chrominance), 162 symbols."""
    symbols = {0x00, 0xF0} | {(run << 4) | size for run in range(16) for size in range(1, 11)}
    head = AC_HEADS[table]
    return head + tuple(sorted(symbols - set(head)))


def huffman_codes(bits: tuple[int, ...], vals: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    """symbol -> (code, length in bits), codes assigned as in Annex C
    (Figures C.1-C.3: in order of length, each one more than the last,
    doubled at each new length)."""
    codes, code, k = {}, 0, 0
    for length, count in enumerate(bits, start=1):
        for _ in range(count):
            codes[vals[k]] = (code, length)
            code, k = code + 1, k + 1
        code <<= 1
    return codes


def _segment(marker: int, payload: bytes) -> bytes:
    if len(payload) + 2 > JPEG_SEGMENT_MAX:
        raise ValueError(f"jpeg: a marker segment holds at most {JPEG_SEGMENT_MAX - 2} bytes, got {len(payload)}")
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def _tables() -> bytes:
    """DQT (table 0: DC_QUANT for DC, 1 for every AC coefficient, which are
    all zero), SOF0 and DHT (the four Annex K tables)."""
    dqt = _segment(0xDB, bytes([0x00, DC_QUANT] + [1] * 63))
    sof = _segment(0xC0, struct.pack(">BHHB", 8, JPEG_HEIGHT, JPEG_WIDTH, 3)
                   + b"".join(bytes([c, 0x11, 0]) for c in (1, 2, 3)))
    dht = b"".join(bytes([(tc << 4) | th, *bits, *vals]) for tc, th, bits, vals in (
        (0, 0, DC_BITS[0], DC_VALS[0]), (0, 1, DC_BITS[1], DC_VALS[1]),
        (1, 0, AC_BITS[0], ac_vals(0)), (1, 1, AC_BITS[1], ac_vals(1))))
    return dqt + sof + _segment(0xC4, dht)


def entropy_coded(blocks: list[tuple[int, int, int]]) -> bytes:
    """The scan of DC-only blocks, one (Y, Cb, Cr) sample value per block
    in raster order, one MCU per block position (F.1.2.1: the DC
    difference's category and extra bits, then EOB), 0xFF bytes stuffed
    with 0x00 and the last byte padded with 1 bits (F.1.2.3)."""
    dc = [huffman_codes(DC_BITS[t], DC_VALS[t]) for t in (0, 1)]
    eob = [huffman_codes(AC_BITS[t], ac_vals(t))[0x00] for t in (0, 1)]
    acc, nbits, pred = 0, 0, [0, 0, 0]
    for samples in blocks:
        for comp, sample in enumerate(samples):
            t = 0 if comp == 0 else 1
            q = sample - 128
            diff, pred[comp] = q - pred[comp], q
            size = abs(diff).bit_length()
            extra = diff if diff >= 0 else diff + (1 << size) - 1
            for code, length in (dc[t][size], (extra, size), eob[t]):
                acc, nbits = (acc << length) | code, nbits + length
    pad = -nbits % 8
    acc, nbits = (acc << pad) | ((1 << pad) - 1), nbits + pad
    return acc.to_bytes(nbits // 8, "big").replace(b"\xff", b"\xff\x00")


def jpeg(n_bytes: int, rng: random.Random) -> Image:
    """A baseline JPEG of exactly n_bytes: JPEG_WIDTH x JPEG_HEIGHT in 8x8
    blocks of seeded YCbCr colours, the rest in APP15 segments before the
    tables and the frame."""
    bw, bh = JPEG_WIDTH // 8, JPEG_HEIGHT // 8
    raw = rng.randbytes(bw * bh * 3)
    blocks = [tuple(raw[i:i + 3]) for i in range(0, len(raw), 3)]
    pixels = tuple(blocks[(y // 8) * bw + x // 8] for y in range(JPEG_HEIGHT) for x in range(JPEG_WIDTH))
    jfif = _segment(0xE0, b"JFIF\x00" + struct.pack(">BBBHHBB", 1, 2, 0, 1, 1, 0, 0))
    head = b"\xff\xd8" + jfif
    scan = _segment(0xDA, bytes([3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0]))
    tail = _tables() + scan + entropy_coded(blocks) + b"\xff\xd9"
    room, smallest_pad = n_bytes - len(head) - len(tail), 4 + len(JPEG_PAD_ID)
    if room < smallest_pad:
        raise _too_small("jpeg", n_bytes, len(head) + len(tail) + smallest_pad)
    pads = [_segment(JPEG_PAD_MARKER, JPEG_PAD_ID + rng.randbytes(k - smallest_pad))
            for k in split_sizes(room, smallest_pad, JPEG_SEGMENT_MAX + 2)]
    data = head + b"".join(pads) + tail
    assert len(data) == n_bytes, (len(data), n_bytes)
    return Image(data, JPEG_WIDTH, JPEG_HEIGHT, "YCbCr", pixels)


ENCODERS = {".png": png, ".jpg": jpeg}


def encode(ext: str, n_bytes: int, rng: random.Random) -> Image:
    """The image for a file name ending in `ext` (.png or .jpg), exactly
    n_bytes long, its pixels and padding drawn from rng."""
    if ext not in ENCODERS:
        raise ValueError(f"image extension: {ext!r} is not one of {sorted(ENCODERS)}")
    return ENCODERS[ext](n_bytes, rng)
