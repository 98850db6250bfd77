"""Region path profiles (topologies/regions.yaml, tortoiselab.spec.regions)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from tortoiselab.spec import regionfiles as RF
from tortoiselab.spec import regions as R
from tortoiselab.spec import regiontable
from tortoiselab.spec.pathspec import PathSpec

SHIPPED = RF.DEFAULT_FILE

# What the task asks for: every region/access type with published figures,
# satellite, the well-known presets, and bursty-loss variants of the lossy
# mobile profiles.
EXPECTED = {
    "india-mobile-2017", "india-desktop-2017", "india-lossy",
    "china-desktop-2017", "china-mobile-2016",
    "us-desktop-2017", "us-mobile-lte",
    "germany-mobile-2018", "singapore-mobile-2018", "sa-cellular-2017",
    "satellite-geo",
    "devtools-slow-4g", "devtools-fast-4g",
    "lighthouse-mobile-slow-4g", "lighthouse-mobile-regular-3g",
    "wpt-cable", "wpt-dsl", "wpt-3g", "wpt-3g-slow", "wpt-2g",
    "india-mobile-2017-bursty", "china-mobile-2016-bursty", "germany-mobile-2018-bursty",
    "singapore-mobile-2018-bursty",
}


def _profile(rtt=50, **extra_path):
    path = {"rtt_ms": rtt, "jitter_ms": 0, "loss_pct": 0, "rate_mbit": 10, **extra_path}
    return {
        "description": "test profile",
        "path": path,
        "sources": {k: "test citation" for k in path},
    }


def _write(tmp_path: Path, name: str, profiles: dict, addons: dict | None = None) -> Path:
    doc = {"version": 1, "profiles": profiles}
    if addons is not None:
        doc["addons"] = addons
    f = tmp_path / name
    f.write_text(yaml.safe_dump(doc))
    return f


@pytest.fixture
def shipped() -> R.Regions:
    return RF.load_regions(SHIPPED)


@pytest.fixture
def no_user_files(monkeypatch, tmp_path):
    """Keep the developer's own region files out of load_regions()."""
    monkeypatch.delenv(RF.ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


# --- the shipped file ------------------------------------------------------


def test_shipped_file_loads(shipped):
    assert shipped.version == 1
    assert EXPECTED <= set(shipped.profiles)
    assert shipped.files == [SHIPPED]
    assert {"distant-origin-us-australia", "distant-origin-europe-us-east"} <= set(shipped.addons)


def test_default_load_is_the_shipped_file(no_user_files):
    regions = RF.load_regions()
    assert regions.files == [RF.DEFAULT_FILE]
    assert set(regions.profiles) == set(RF.load_regions(SHIPPED).profiles)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_path_value_has_a_source(shipped, name):
    prof = shipped.profiles[name]
    given = prof.sourced()  # the path's values and the background load, if given
    assert set(prof.sources) == set(given)
    for field in given:
        src = prof.sources[field]
        assert src == R.ASSUMPTION or (src.strip() and not src.lower().startswith("assum")), (field, src)
    # the four values a PathSpec would otherwise default are always stated
    assert {"rtt_ms", "jitter_ms", "loss_pct", "rate_mbit"} <= set(prof.path.given())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_profile_is_a_valid_pathspec(shipped, name):
    spec = shipped.path(name)
    assert isinstance(spec, PathSpec)
    assert spec.rtt_ms == shipped.profiles[name].path.rtt_ms
    assert spec.queue() >= 2
    # the same through the public helper
    assert RF.profile_path(name, regions=shipped) == spec


def test_shipped_values_match_regions_md(shipped):
    """Spot checks against the published figures (topologies/README.md, "Sources")."""
    p = shipped.path("india-mobile-2017")
    assert (p.rtt_ms, p.jitter_ms, p.loss_pct, p.rate_mbit, p.rate_up_mbit) == (80, 20, 1.0, 6.1, 3.4)
    p = shipped.path("india-lossy")
    assert (p.rtt_ms, p.loss_pct, p.loss_up, p.rate_mbit, p.queue_pkts) == (56, 4.77, 0, 0.57, 14)
    p = shipped.path("satellite-geo")
    assert (p.rtt_ms, p.rate_mbit, p.rate_up_mbit) == (630, 18.1, 3.4)
    p = shipped.path("wpt-2g")
    assert (p.rtt_ms, p.loss_pct, p.rate_mbit, p.rate_up_mbit) == (1300, 0, 0.035, 0.032)
    assert shipped.addons["distant-origin-us-australia"].add_rtt_ms == 185
    assert shipped.addons["distant-origin-europe-us-east"].add_rtt_ms == 78


def test_assumptions_are_counted(shipped):
    # india-mobile-2017's jitter, loss and buffer are assumptions
    assert shipped.profiles["india-mobile-2017"].assumptions() == ["jitter_ms", "loss_pct", "queue_ms"]
    assert shipped.profiles["india-lossy"].assumptions() == []
    assert shipped.profiles["wpt-cable"].assumptions() == []


def test_notes_only_name_path_fields(shipped):
    for prof in shipped.profiles.values():
        assert set(prof.notes) <= set(R.PATH_FIELDS) | {"background_load_pct"}


# --- queue_ms -> queue_pkts ------------------------------------------------


def test_queue_ms_conversion_exact():
    # 6.1 Mbit/s * 300 ms = 228 750 bytes = 151.09 frames of 1514 bytes -> 152
    assert R.queue_pkts_from_ms(6.1, 300) == 152
    # exactly 10 frames: 1514 * 8 * 10 bits in 10 ms = 12.112 Mbit/s; no float step up to 11
    assert R.queue_pkts_from_ms(12.112, 10) == 10
    assert R.queue_pkts_from_ms(12.112, 10.001) == 11
    # never below 2
    assert R.queue_pkts_from_ms(0.035, 1) == 2


def test_queue_ms_becomes_queue_pkts_in_the_pathspec(shipped):
    assert shipped.path("india-mobile-2017").queue_pkts == 152
    assert shipped.path("china-mobile-2016").queue_pkts == 362  # 6.25 Mbit/s, 700 ms
    assert shipped.path("sa-cellular-2017").queue_pkts == 427   # 3.04 Mbit/s, 1.7 s


def test_no_buffer_given_means_one_bdp(shipped):
    spec = shipped.path("wpt-cable")
    assert spec.queue_pkts is None
    assert spec.queue() == spec.bdp_pkts()


def test_queue_ms_and_queue_pkts_together_refused(tmp_path):
    f = _write(tmp_path, "r.yaml", {"x": _profile(queue_ms=10, queue_pkts=5)})
    with pytest.raises(R.RegionError, match=r"profiles\.x\.path\.queue_ms: .*not both"):
        RF.load_regions(f)


# --- checking ----------------------------------------------------------------


def test_missing_source_refused(tmp_path):
    prof = _profile(rate_up_mbit=2)
    del prof["sources"]["rate_up_mbit"]
    f = _write(tmp_path, "r.yaml", {"x": prof})
    with pytest.raises(R.RegionError, match=r"profiles\.x\.sources\.rate_up_mbit: missing"):
        RF.load_regions(f)


def test_source_for_unset_value_refused(tmp_path):
    prof = _profile()
    prof["sources"]["queue_ms"] = "somewhere"
    f = _write(tmp_path, "r.yaml", {"x": prof})
    with pytest.raises(R.RegionError, match=r"sources\.queue_ms: path sets no queue_ms"):
        RF.load_regions(f)


@pytest.mark.parametrize("bad", ["Assumption", "assumption: guessed", "(A)", "", " x"])
def test_assumption_must_be_the_bare_word(tmp_path, bad):
    prof = _profile()
    prof["sources"]["jitter_ms"] = bad
    f = _write(tmp_path, "r.yaml", {"x": prof})
    with pytest.raises(R.RegionError, match=r"profiles\.x\.sources\.jitter_ms"):
        RF.load_regions(f)


def test_unknown_key_and_bad_value_name_the_field(tmp_path):
    prof = _profile(rtt=-1)
    prof["path"]["delay_ms"] = 5
    f = _write(tmp_path, "r.yaml", {"x": prof})
    with pytest.raises(R.RegionError) as exc:
        RF.load_regions(f)
    msg = str(exc.value)
    assert str(f) in msg
    assert "profiles.x.path.delay_ms: Extra inputs are not permitted" in msg


def test_out_of_range_value_names_the_field(tmp_path):
    f = _write(tmp_path, "r.yaml", {"x": _profile(rtt=-1)})
    with pytest.raises(R.RegionError, match=r"profiles\.x\.path\.rtt_ms: .*greater than or equal to 0"):
        RF.load_regions(f)


def test_duplicate_key_in_one_file_refused(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text("version: 1\nprofiles:\n  a: {}\n  a: {}\n")
    with pytest.raises(R.RegionError, match="duplicate key 'a'"):
        RF.load_regions(f)


# --- names -------------------------------------------------------------------


def test_unknown_profile_error(shipped):
    with pytest.raises(R.RegionError) as exc:
        RF.profile_path("india-mobil", regions=shipped)
    msg = str(exc.value)
    assert isinstance(exc.value, ValueError)
    assert msg.startswith("path.region: unknown region profile 'india-mobil'")
    assert "did you mean 'india-mobile-2017'?" in msg
    known = msg.split("known: ", 1)[1].split(", ")
    assert set(known) == set(shipped.profiles)
    assert known[0] == "india-mobile-2017"  # close matches first


def test_unknown_profile_lists_substring_matches_first(shipped):
    with pytest.raises(R.RegionError) as exc:
        shipped.path("wpt")
    known = str(exc.value).split("known: ", 1)[1].split(", ")
    assert set(known[:5]) == {"wpt-cable", "wpt-dsl", "wpt-3g", "wpt-3g-slow", "wpt-2g"}


def test_unknown_addon_error(shipped):
    with pytest.raises(R.RegionError, match=r"^path\.addon: unknown add-on 'far'.*known: "):
        shipped.path("wpt-cable", "far")


# --- add-ons -------------------------------------------------------------------


def test_addon_adds_rtt(shipped):
    base = shipped.path("us-desktop-2017")
    far = RF.profile_path("us-desktop-2017", "distant-origin-us-australia", regions=shipped)
    assert far.rtt_ms == base.rtt_ms + 185
    # everything else as it was, the buffer given in ms included
    assert far.model_dump(exclude={"rtt_ms"}) == base.model_dump(exclude={"rtt_ms"})


def test_addon_on_a_default_queue_is_one_bdp_of_the_longer_path(shipped):
    far = shipped.path("wpt-cable", "distant-origin-europe-us-east")
    assert far.rtt_ms == 28 + 78
    assert far.queue_pkts is None and far.queue() == far.bdp_pkts()


def test_addon_beyond_range_refused(tmp_path):
    f = _write(tmp_path, "r.yaml", {"x": _profile(rtt=9_000)},
               addons={"far": {"add_rtt_ms": 2_000, "source": "test"}})
    with pytest.raises(R.RegionError, match=r"path\.addon: 'far' on 'x': path\.rtt_ms"):
        RF.load_regions(f).path("x", "far")


# --- user files ----------------------------------------------------------------


def test_user_file_adds_a_profile(monkeypatch, tmp_path):
    user = _write(tmp_path, "mine.yaml", {"my-lab-link": _profile(rtt=123)},
                  addons={"to-mars": {"add_rtt_ms": 400, "source": "assumption"}})
    monkeypatch.setenv(RF.ENV_VAR, str(user))
    regions = RF.load_regions()
    assert regions.files == [RF.DEFAULT_FILE, user]
    assert regions.path("my-lab-link").rtt_ms == 123
    assert regions.path("my-lab-link", "to-mars").rtt_ms == 523
    assert regions.origin("my-lab-link") == user
    assert regions.origin("india-lossy") == RF.DEFAULT_FILE
    assert "india-lossy" in regions.profiles


def test_duplicate_profile_in_user_file_rejected(monkeypatch, tmp_path):
    user = _write(tmp_path, "mine.yaml", {"india-mobile-2017": _profile()})
    monkeypatch.setenv(RF.ENV_VAR, str(user))
    with pytest.raises(R.RegionError) as exc:
        RF.load_regions()
    msg = str(exc.value)
    assert "'india-mobile-2017' is already defined" in msg
    assert str(user) in msg and str(RF.DEFAULT_FILE) in msg


def test_duplicate_between_two_user_files_rejected(monkeypatch, tmp_path):
    a = _write(tmp_path, "a.yaml", {"mine": _profile()})
    b = _write(tmp_path, "b.yaml", {"mine": _profile(rtt=99)})
    monkeypatch.setenv(RF.ENV_VAR, os.pathsep.join([str(a), str(b)]))
    with pytest.raises(R.RegionError, match=re.escape(f"{b}: profile 'mine' is already defined in {a}")):
        RF.load_regions()


def test_duplicate_addon_rejected(monkeypatch, tmp_path):
    user = _write(tmp_path, "mine.yaml", {},
                  addons={"distant-origin-us-australia": {"add_rtt_ms": 1, "source": "x y"}})
    monkeypatch.setenv(RF.ENV_VAR, str(user))
    with pytest.raises(R.RegionError, match="addon 'distant-origin-us-australia' is already defined"):
        RF.load_regions()


def test_missing_file_in_env_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv(RF.ENV_VAR, str(tmp_path / "nope.yaml"))
    with pytest.raises(R.RegionError, match=rf"^{RF.ENV_VAR}: .*nope\.yaml: no such region file"):
        RF.load_regions()


def test_home_config_file_used_when_env_unset(monkeypatch, tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "tortoiselab").mkdir(parents=True)
    _write(home / ".config" / "tortoiselab", "regions.yaml", {"home-link": _profile()})
    monkeypatch.delenv(RF.ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(home))
    regions = RF.load_regions()
    assert "home-link" in regions.profiles
    # $TORTOISE_REGIONS, when set, replaces the home file
    other = _write(tmp_path, "other.yaml", {"other-link": _profile()})
    monkeypatch.setenv(RF.ENV_VAR, str(other))
    regions = RF.load_regions()
    assert "other-link" in regions.profiles and "home-link" not in regions.profiles


def test_same_file_twice_is_read_once(monkeypatch):
    monkeypatch.setenv(RF.ENV_VAR, str(RF.DEFAULT_FILE))
    assert RF.load_regions().files == [RF.DEFAULT_FILE]


# --- table -------------------------------------------------------------------


def test_table_lists_all_profiles(shipped):
    table = regiontable.format_regions_table(shipped)
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["profile", "RTT"]
    names = [ln.split()[0] for ln in lines[1:len(shipped.profiles) + 1]]
    assert names == list(shipped.profiles)
    for name in shipped.addons:
        assert name in table
    row = next(ln for ln in lines if ln.startswith("india-mobile-2017 "))
    assert "80±20" in row and "6.1/3.4" in row and "152 (300 ms)" in row and " 3/6 " in row
    row = next(ln for ln in lines if ln.startswith("india-lossy "))
    assert "4.77/0" in row and " 0/7 " in row
    assert f"{len(shipped.profiles)} profiles" in table


def test_bursty_variants_are_their_profiles_with_bursts(shipped):
    """Each lossy mobile profile keeps its clean form (the studies' results
    stay what they are) and has a -bursty variant: the same values, its loss
    in bursts (Simple Gilbert), the burst length an assumption with a note."""
    for base in ("india-mobile-2017", "china-mobile-2016", "germany-mobile-2018", "singapore-mobile-2018"):
        clean, bursty = shipped.path(base), shipped.path(f"{base}-bursty")
        assert clean.loss_burst_pkts is None and clean.loss_model("down") is None
        assert bursty.model_dump(exclude={"loss_burst_pkts"}) == clean.model_dump(exclude={"loss_burst_pkts"})
        assert bursty.burst_down_pkts == bursty.burst_up_pkts == 3
        assert bursty.loss_model("down").loss_rate() == pytest.approx(clean.loss_pct / 100, rel=1e-5)
        prof = shipped.profiles[f"{base}-bursty"]
        assert "loss_burst_pkts" in prof.assumptions() and "Baltrunas" in prof.notes["loss_burst_pkts"]


def test_region_files_cite_only_what_the_repository_or_the_public_has():
    """Profiles cite published measurements and the repository's own docs,
    never a document outside the repository."""
    for f in (SHIPPED, SHIPPED.parent / "README.md", Path(R.__file__), Path(RF.__file__)):
        text = f.read_text()
        assert "REGIONS.md" not in text and "../shared" not in text, f


def test_a_region_file_is_parsed_once_per_content(tmp_path, shipped):
    """read_regions_file caches by the file's bytes: the same file gives an
    equal, separate copy; an edit of the same size written at once (the
    same second, so no modification time could tell) is read anew."""
    first, second = RF.read_regions_file(SHIPPED), RF.read_regions_file(SHIPPED)
    assert first == second and first is not second and first.profiles == shipped.profiles
    assert first._files == [SHIPPED] and first._origin == second._origin
    f = tmp_path / "r.yaml"
    f.write_text(SHIPPED.read_text())
    rtt = RF.read_regions_file(f).path("india-desktop-2017").rtt_ms
    text = SHIPPED.read_text()
    edited = re.sub(r"(india-desktop-2017:.*?rtt_ms: )54,", r"\g<1>55,", text, count=1, flags=re.S)
    assert edited != text and len(edited) == len(text)
    f.write_text(edited)
    assert RF.read_regions_file(f).path("india-desktop-2017").rtt_ms != rtt
