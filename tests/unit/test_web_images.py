"""The site's images are valid images of the drawn size (web/images.py,
issue 37): every .png and .jpg of the site decodes (Pillow as the
decoder only) to the pixels the seed drew, every class bound is met to the
byte, the padding sits where a decoder reads it before the pixels, and the
bytes are the same on every generation. Under generator /1 the images were
random bytes, which no decoder opens."""

from __future__ import annotations

import hashlib
import io
import random
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from tortoiselab.web import images, pages

FORMATS = {".png": "PNG", ".jpg": "JPEG"}
# (page or asset kind, ext, lo, hi): every class of image the site draws
IMAGE_CLASSES = ([(c.name, c.ext, c.lo, c.hi) for c in pages.STONY_BROOK]
                 + [(a.kind, a.ext, a.lo, a.hi) for a in pages.FEED_ASSETS if a.ext in FORMATS])
# seed 1's object bytes per page as generator /1 wrote them (webroot/README.md):
# the images changed, their sizes must not (our loader's timings stay)
SEED1_OBJECT_BYTES = {"tiny.html": 28_560, "small.html": 178_706, "medium.html": 1_175_249,
                      "large.html": 3_752_152, "feed.html": 861_528 - 60_000}
# sha256 over seed 1's image files (path and sha256, sorted), as this
# generator writes them on any machine. Changing the images' bytes means a
# new GENERATOR (a site made before is then made again) and a new digest here.
SEED1_IMAGES_SHA256 = "5697cd6588169b18a3f9623245497356cfa9584987e3cb437e5acabaed585eca"


def decode(data: bytes, mode: str) -> PILImage.Image:
    """The image as Pillow decodes it, every byte read (load()); a JPEG in
    YCbCr, before the colour conversion, where the samples are exact."""
    im = PILImage.open(io.BytesIO(data))
    if im.format == "JPEG" and mode == "YCbCr":
        im.draft("YCbCr", None)
    im.load()
    return im


def pixels(im: PILImage.Image) -> list[tuple[int, ...]]:
    return [im.getpixel((x, y)) for y in range(im.height) for x in range(im.width)]


def assert_decodes_to(img: images.Image, ext: str) -> None:
    im = decode(img.data, img.mode)
    assert im.format == FORMATS[ext] and im.size == (img.width, img.height) and im.mode == img.mode
    assert pixels(im) == list(img.pixels)


def drawn(seed: int, entry: dict) -> images.Image:
    """The image web/pages.py drew for a site image: its body keyed as the
    generator keys it (a Stony Brook object by its path, a feed asset by
    kind and index)."""
    rel = entry["path"][1:]
    if entry["file"].startswith("www/"):
        key = f"body:{rel}"
    else:
        kind, index = Path(rel).stem.split("-")[:2]
        key = f"body:feed:{kind}:{int(index)}"
    return images.encode(Path(rel).suffix, entry["bytes"], pages._rng(seed, key))


def site_images(m: dict) -> list[dict]:
    return sorted({o["file"]: o for p in m["pages"].values() for o in p["objects"]
                   if Path(o["file"]).suffix in FORMATS}.values(), key=lambda o: o["file"])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("site-images")
    return base, pages.generate_site(base / "a", seed=1, bulk_sizes=()), \
        pages.generate_site(base / "b", seed=1, bulk_sizes=())


def test_every_image_of_the_site_decodes_to_its_seeded_pixels(site):
    base, m, _ = site
    objs = site_images(m)
    assert len(objs) == 50 + 30 + 20 + 3 + 6 + 12 + 8 + 4
    for o in objs:
        data = (base / "a" / o["file"]).read_bytes()
        ext = Path(o["file"]).suffix
        im = decode(data, "RGB")
        assert im.format == FORMATS[ext], o["file"]
        assert o["content_type"] == f"image/{im.format.lower()}"
        want = drawn(1, o)
        assert len(data) == o["bytes"] and data == want.data, o["file"]
        assert_decodes_to(want, ext)


def test_sizes_are_those_generator_1_drew(site):
    _, m, _ = site
    assert pages.GENERATOR == "tortoiselab.web.pages/2"
    assert {k: m["pages"][k]["object_bytes"] for k in SEED1_OBJECT_BYTES} == SEED1_OBJECT_BYTES


def test_byte_identical_across_generations_and_machines(site):
    base, m, m2 = site
    assert m == m2
    rows = [f"{o['file']} {o['sha256']}" for o in site_images(m)]
    assert [hashlib.sha256((base / "b" / o["file"]).read_bytes()).hexdigest() for o in site_images(m)] == \
        [o["sha256"] for o in site_images(m)]
    assert hashlib.sha256("\n".join(rows).encode()).hexdigest() == SEED1_IMAGES_SHA256


@pytest.mark.parametrize("kind,ext,lo,hi", IMAGE_CLASSES)
def test_each_class_bound_is_met_to_the_byte(kind, ext, lo, hi):
    for seed in range(3):
        for n in (lo, hi):
            img = images.encode(ext, n, random.Random(f"{kind}:{seed}"))
            assert len(img.data) == n
            assert_decodes_to(img, ext)


def png_chunks(data: bytes) -> list[tuple[bytes, int]]:
    """(type, data length) of every chunk, each CRC checked."""
    assert data[:8] == images.PNG_SIGNATURE
    out, i = [], 8
    while i < len(data):
        (n,), kind = struct.unpack(">I", data[i:i + 4]), data[i + 4:i + 8]
        assert struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0] == zlib.crc32(data[i + 4:i + 8 + n])
        out.append((kind, n))
        i += 12 + n
    assert i == len(data)
    return out


def jpeg_segments(data: bytes) -> list[tuple[int, bytes]]:
    """(marker, payload) of every marker segment from SOI to SOS."""
    assert data[:2] == b"\xff\xd8" and data[-2:] == b"\xff\xd9"
    out, i = [], 2
    while True:
        assert data[i] == 0xFF
        marker, (n,) = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])
        out.append((marker, data[i + 4:i + 2 + n]))
        i += 2 + n
        if marker == 0xDA:
            return out


def test_png_padding_is_a_private_ancillary_chunk_before_the_pixels():
    img = images.png(2_345_678, random.Random(7))  # more than one padding chunk
    chunks = png_chunks(img.data)
    kinds = [k for k, _ in chunks]
    assert kinds[0] == b"IHDR" and kinds[-2:] == [b"IDAT", b"IEND"]
    assert set(kinds[1:-2]) == {images.PNG_PAD_CHUNK} and len(kinds) - 3 == 3
    assert all(n <= images.PNG_PAD_CHUNK_MAX for _, n in chunks)
    t = images.PNG_PAD_CHUNK
    # bit 5 of each letter: ancillary, private, reserved (clear), safe to copy (ISO 15948 §5.4)
    assert [bool(b & 0x20) for b in t] == [True, True, False, True]
    assert_decodes_to(img, ".png")


def test_jpeg_padding_is_app15_segments_before_the_frame():
    img = images.jpeg(1_446_736, random.Random(7))
    segs = jpeg_segments(img.data)
    markers = [m for m, _ in segs]
    assert markers[0] == 0xE0 and segs[0][1].startswith(b"JFIF\x00")
    pads = [p for m, p in segs if m == images.JPEG_PAD_MARKER]
    assert len(pads) == 23 and all(p.startswith(images.JPEG_PAD_ID) and len(p) + 2 <= 65535 for p in pads)
    assert markers.index(0xC0) > max(i for i, m in enumerate(markers) if m == images.JPEG_PAD_MARKER)
    assert markers[-4:] == [0xDB, 0xC0, 0xC4, 0xDA]


def test_huffman_tables_are_annex_k_as_libjpeg_writes_them():
    """Our DHT against the one Pillow's libjpeg writes for a baseline file
    with its standard tables (not optimised): the same four tables."""
    buf = io.BytesIO()
    PILImage.new("RGB", (16, 16), (10, 200, 30)).save(buf, "JPEG", quality=75, optimize=False, subsampling=0)
    libjpeg = b"".join(p for m, p in jpeg_segments(buf.getvalue()) if m == 0xC4)
    ours = b"".join(p for m, p in jpeg_segments(images.jpeg(3000, random.Random(1)).data) if m == 0xC4)

    def tables(dht: bytes) -> dict[int, bytes]:
        out, i = {}, 0
        while i < len(dht):
            n = 17 + sum(dht[i + 1:i + 17])
            out[dht[i]] = dht[i:i + n]
            i += n
        return out
    assert tables(ours) == tables(libjpeg) and sorted(tables(ours)) == [0x00, 0x01, 0x10, 0x11]


def test_too_small_a_size_is_refused_with_the_smallest():
    with pytest.raises(ValueError, match=r"png: 118 bytes .* at least 119"):
        images.png(118, random.Random(1))
    with pytest.raises(ValueError, match=r"jpeg: 500 bytes .* at least"):
        images.jpeg(500, random.Random(1))
    with pytest.raises(ValueError, match="image extension"):
        images.encode(".gif", 1000, random.Random(1))
    assert images.split_sizes(65_537 + 5, 16, 65_537) == [32_771, 32_771]
    with pytest.raises(ValueError):
        images.split_sizes(10, 16, 65_537)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.one_of(st.integers(200, 20_000), st.integers(20_000, 2_600_000)), seed=st.integers(0, 2**32))
def test_any_png_size_comes_out_exact_and_decodes(n, seed):
    img = images.png(n, random.Random(seed))
    assert len(img.data) == n
    assert_decodes_to(img, ".png")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.one_of(st.integers(2000, 200_000), st.integers(200_000, 3_000_000)), seed=st.integers(0, 2**32))
def test_any_jpeg_size_comes_out_exact_and_decodes(n, seed):
    img = images.jpeg(n, random.Random(seed))
    assert len(img.data) == n
    assert_decodes_to(img, ".jpg")

