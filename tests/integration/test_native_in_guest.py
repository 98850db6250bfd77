"""The native backend, tested inside the lab kernel.

This host's kernel cannot emulate (no netem), but the UML lab kernel is
itself a root Linux with netem, every algorithm and our modules. So one
small experiment runs on the real clock (a) on the uml backend from the
host, twice (the real clock's own noise), and (b) as `tortoise run
--backend native` inside a lab guest (the guest task `command`,
host/inguest.py), where the native backend finds our modules loaded and
Open vSwitch running, as on a Debian host.

Same experiment, same seed: the same run ids, the same netem seeds and the
same loss draws: in each direction, netem dropped the packets at the same
positions of the stream, over the positions both loads reached
(analysis/pathloss.py, from each run's two captures). On the real clock
the endpoints' timing changes what they send (delayed ACKs, how writes
become segments), so the packet a draw hits is not always the same one:
a draw that hits a handshake segment in one load and a pure ACK in the
other costs one load a retransmission timeout and not the other (seen
between two uml passes: 1329 vs 2611 ms). PLT is held to PLT_TOLERANCE_MS
for every run whose loads retransmitted alike, kind by kind (fast
retransmits, timeouts: seen, 7 retransmissions in each load and 884 ms
apart), within the real clock's measured noise, 1.5 times. The comparison table is
printed (pytest -s) and written beside the results (comparison.txt).
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, write_yaml
from tortoiselab.analysis.pathloss import common_draws, path_losses
from tortoiselab.host import store
from tortoiselab.host.store import captures
from tortoiselab.host.runsummary import disturbed
from tortoiselab.host.determinism import retransmissions
from tortoiselab.host.inguest import run_in_guest, tortoise_argv

pytestmark = pytest.mark.lab

EXP = """
    name: native-vs-uml
    description: small page over 150 ms RTT, 2 % loss, 10 Mbit/s; the same runs on uml and native
    repetitions: 4
    seed: 7
    path: {rtt_ms: 150, loss_pct: 2, rate_mbit: 10}
    server: {cc: cubic, initcwnd_pkts: 10, protocol: h2, tls: "1.3", cert: shared}
    client: {page: small.html}
"""
NAME = "native-vs-uml"
# our modules with parameters, as a run sets them: on uml at insmod, on
# native through sysfs on the modules found loaded (and put back afterwards)
MODULES_EXP = """
    name: native-modules
    repetitions: 1
    seed: 3
    path: {rtt_ms: 100, loss_pct: 0, rate_mbit: 20}
    server: {cc: reno_beta, initcwnd_pkts: 10}
    client: {page: tiny.html}
    sweep:
      server.cc+server.module_params:
        - [reno_beta, {reno_beta: {beta: 0.8}}]
        - [cubic_plus, {cubic_plus: {n: 2, rtt_aware: 1}}]
"""
# what a native run must leave as it found it in the kernel it runs on (the
# guest's, standing in for a host's): congestion control settings of the
# root namespace, our modules and their parameters, links, namespaces, qdiscs
HOST_STATE = ("cat /proc/sys/net/ipv4/tcp_allowed_congestion_control /proc/sys/net/ipv4/tcp_congestion_control; "
              "grep -r . /sys/module/tcp_cubic_plus/parameters /sys/module/tcp_reno_beta/parameters; "
              "cut -d' ' -f1 /proc/modules | sort; ip -o link show | cut -d: -f2; ip netns list; tc qdisc show")
RUN_TIMEOUT_S = 900
# The real clock's own noise, measured on this project's 2-core machines
# (shared, a CI run going) with this experiment (4 runs, PLT 1.3 to 2.7 s):
# over 4 uml passes, the largest PLT difference between two passes of one
# run that retransmitted alike was 198 ms (8.5 %); 3 native passes against
# those uml passes differed by at most 225 ms, with a mean of -10 ms (no
# bias); later passes of this test saw up to 180 ms between its two uml
# passes. The bound is 1.5 times the uml-vs-uml noise.
PLT_TOLERANCE_MS = 300.0
# The same comparison with the guest on the virtual clock (the native
# backend does not know: it records "real"): both sides repeat to the
# microsecond, and differed by at most 1.33 ms (what native does otherwise:
# no dropped caches, the host's resolver files, its loader's start).
PLT_VIRTUAL_TOLERANCE_MS = 5.0
MIN_COMPARED = 3  # runs of 4 whose loads must have retransmitted alike


def _side(exp_dir: Path) -> dict[str, dict]:
    """run id -> what is compared, from the stored run folders."""
    out = {}
    for st in store.read_records(exp_dir):
        rec, d = st.record, st.run_dir
        out[rec.run_id] = {
            "ok": rec.ok, "error": rec.error, "seed": rec.seed, "meta": rec.meta.model_dump(),
            "plt_ms": rec.summary.plt_ms if rec.summary else None, "losses": path_losses(d / "server.pcap", d / "client.pcap"),
            "retrans": retransmissions(captures.connections(d))}  # by kind: a timeout is not a fast retransmit
    return out


WHOLE = (0, 4)  # tortoise run's exit codes when every run is stored ok or disturbed (real clock, busy host)


def _uml_pass(d: Path, exp: Path, name: str, exp_name: str = NAME, clock: str = "real") -> dict[str, dict]:
    p = subprocess.run([*TORTOISE, "run", str(exp), "--backend", "uml", "--clock", clock, "--results",
                        str(d / name)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    # 4: every run stored ok but those on the real clock that measured their path off, stored failed as
    # disturbed (docs/running.md, "Exit codes"): on a busy host that is the real clock's honest answer; the
    # comparison below takes their figures too (the lab did what it was told; the host was slow)
    assert p.returncode in WHOLE, p.stdout[-3000:] + p.stderr[-3000:]
    return _side(d / name / exp_name)


def _native_script() -> list[str]:
    """The guest's command: the host state, both experiments on the native
    backend, the host state again."""
    run = " ".join(tortoise_argv("run", "{}", "--backend", "native", "--results", "results"))
    return ["sh", "-c", f"state() {{ {HOST_STATE}; }}; state > state-before.txt; "
                        f"rc=0; for f in e.yaml m.yaml; do {run.format('$f')}; r=$?; "
                        f"case $r in {'|'.join(map(str, WHOLE))}) ;; *) rc=$r; break ;; esac; done; "
                        "state > state-after.txt; exit $rc"]


@pytest.fixture(scope="module")
def passes(tmp_path_factory, lab_kernel):
    d = tmp_path_factory.mktemp("native-vs-uml")
    exp, mods = write_yaml(d, EXP), write_yaml(d, MODULES_EXP, "m.yaml")
    uml = _uml_pass(d, exp, "uml")
    guest = d / "guest"
    guest.mkdir()
    for f in (exp, mods):  # the guest has its own /tmp: the files go into its work folder
        shutil.copy(f, guest / f.name)
    res = run_in_guest(_native_script(), guest, clock="real", timeout_s=RUN_TIMEOUT_S)
    assert res["exit_code"] == 0 and not res["timed_out"], res["tail"]
    native = _side(guest / "results" / NAME)
    uml2 = _uml_pass(d, exp, "uml-again")
    return d, uml, native, uml2


def _seeds(side: dict) -> dict:
    """Every seed a run used but the virtual clock's start (uml virtual only)."""
    return {k: v for k, v in side["meta"]["seeds"].items() if k != "virtual_epoch_s"}


def _draws(a: dict, b: dict, direction: str) -> str:
    """The positions lost among those both loads reached, or both lists."""
    c = common_draws(a["losses"], b["losses"])[direction]
    return str(c["a"]) if c["a"] == c["b"] else f"{c['a']} vs {c['b']}"


def comparison_table(uml: dict, native: dict, uml2: dict | None = None) -> str:
    """One row per run: seeds, the loss draws, retransmissions and PLT (uml,
    native, and a second uml pass's difference if given)."""
    again = uml2 is not None
    head = (f"{'run':12}  {'netem seeds':11}  {'lost down':16}  {'lost up':18}  "
            f"{'retx u/n/u2' if again else 'retx u/n':11}  "
            f"{'PLT uml':>8}  {'PLT native':>10}  {'n - u':>7}  {'n - u %':>7}" + (f"  {'u2 - u':>7}" if again else ""))
    lines = [head, "-" * len(head)]
    for rid in sorted(uml):
        u, n = uml[rid], native[rid]
        u2 = uml2[rid] if again else u
        seeds = "same" if _seeds(u) == _seeds(n) == _seeds(u2) else "DIFFER"
        d = n["plt_ms"] - u["plt_ms"]
        retx = "/".join(str(x["retrans"]["total"]) for x in ((u, n, u2) if again else (u, n)))
        lines.append(f"{rid:12}  {seeds:11}  {_draws(u, n, 'down'):16}  {_draws(u, n, 'up'):18}  {retx:11}  "
                     f"{u['plt_ms']:8.1f}  {n['plt_ms']:10.1f}  {d:+7.1f}  {100 * d / u['plt_ms']:+7.1f}"
                     + (f"  {u2['plt_ms'] - u['plt_ms']:+7.1f}" if again else ""))
    lines.append("lost: positions in each direction's stream where netem dropped a packet, over the positions both "
                 "the uml and the native load reached; PLT in ms")
    return "\n".join(lines)


def test_native_in_a_lab_guest_matches_uml_on_the_real_clock(passes):
    d, uml, native, uml2 = passes
    table = comparison_table(uml, native, uml2)
    (d / "comparison.txt").write_text(table + "\n")
    print("\n" + table)
    assert sorted(uml) == sorted(native) == sorted(uml2) and len(uml) == 4
    compared = 0
    for rid in uml:
        u, n = uml[rid], native[rid]
        assert all(x["ok"] or disturbed(x) for x in (u, n, uml2[rid])), (rid, u["error"], n["error"],
                                                                          uml2[rid]["error"])
        assert (u["meta"]["backend"], u["meta"]["clock"]) == ("uml", "real")
        assert (n["meta"]["backend"], n["meta"]["clock"]) == ("native", "real")
        assert u["meta"]["kernel_release"] == n["meta"]["kernel_release"]
        assert u["seed"] == n["seed"] and u["meta"]["seeds"] == n["meta"]["seeds"], rid
        for other in (n, uml2[rid]):  # the same loss draws
            for direction, c in common_draws(u["losses"], other["losses"]).items():
                assert c["a"] == c["b"], (rid, direction, c)
        if u["retrans"] == n["retrans"]:
            compared += 1
            assert abs(n["plt_ms"] - u["plt_ms"]) <= PLT_TOLERANCE_MS, (rid, u["plt_ms"], n["plt_ms"])
    assert compared >= MIN_COMPARED
    assert any(common_draws(u["losses"], native[rid]["losses"])[x]["a"] for rid, u in uml.items()
               for x in ("down", "up")), "no load lost a packet: the loss draws compared nothing"


def test_native_sets_our_module_parameters_as_uml_does_and_leaves_the_kernel_as_it_found_it(passes):
    d = passes[0]
    native = _side(d / "guest" / "results" / "native-modules")
    uml = _uml_pass(d, d / "m.yaml", "uml-modules", "native-modules")
    assert sorted(native) == sorted(uml) and len(native) == 2
    for rid, n in native.items():
        u = uml[rid]
        assert all(x["ok"] or disturbed(x) for x in (n, u)), (rid, n["error"], u["error"])
        alg = next(iter(n["meta"]["modules"]))  # native records the modules its runs use
        assert n["meta"]["modules"] == {alg: u["meta"]["modules"][alg]}, rid
        assert n["meta"]["server_sysctls"] == u["meta"]["server_sysctls"], rid
    assert {next(iter(n["meta"]["modules"])): n["meta"]["modules"] for n in native.values()} == {
        "reno_beta": {"reno_beta": {"beta": "0.800"}},
        "cubic_plus": {"cubic_plus": {"beta": "0.700", "fast_convergence": "1", "n": "2", "rtt_aware": "1",
                                      "rtt_ref_ms": "100"}}}
    before, after = ((d / "guest" / f"state-{w}.txt").read_text() for w in ("before", "after"))
    assert "cubic_plus" in before and "reno_beta/parameters/beta:0.500" in before
    assert after == before


def test_native_probe_cc_check_and_loss_response_leave_the_kernel_as_they_found_it(tmp_path, lab_kernel):
    """loss-response sets our modules' parameters per arm and switches the
    kernel's tracing on with its own clock; cc-check selects algorithms.
    On native that kernel is the host's: all of it goes back."""
    state = f"state() {{ {HOST_STATE}; cat /sys/kernel/tracing/tracing_on /sys/kernel/tracing/trace_clock; }}"
    cc = " ".join(tortoise_argv("cc-check", "--backend", "native", "cubic_plus", "reno_beta", "hybla"))
    lr = " ".join(tortoise_argv("loss-response", "--backend", "native", "--work", "lr"))
    script = f"{state}; state > state-before.txt; {cc} && {lr}; rc=$?; state > state-after.txt; exit $rc"
    res = run_in_guest(["sh", "-c", script], tmp_path / "guest", clock="real", timeout_s=RUN_TIMEOUT_S)
    assert res["exit_code"] == 0 and not res["timed_out"], res["tail"]
    out = (tmp_path / "guest" / "command.log").read_text()
    assert "backend native" in out and "reno_beta 0.9" in out
    before, after = ((tmp_path / "guest" / f"state-{w}.txt").read_text() for w in ("before", "after"))
    assert "reno_beta/parameters/beta:0.500" in before and "[local]" in before
    assert after == before


def test_native_in_a_virtual_clock_guest_agrees_with_uml_to_milliseconds(tmp_path, lab_kernel):
    """On the virtual clock CPU costs no time, so the real clock's noise is
    gone: what is left is what the native backend does differently."""
    exp = write_yaml(tmp_path, EXP)
    uml = _uml_pass(tmp_path, exp, "uml", clock="virtual")
    guest = tmp_path / "guest"
    guest.mkdir()
    shutil.copy(exp, guest / "e.yaml")
    res = run_in_guest(tortoise_argv("run", "e.yaml", "--backend", "native", "--results", "results"), guest,
                       clock="virtual", timeout_s=RUN_TIMEOUT_S)
    assert res["exit_code"] == 0 and not res["timed_out"], res["tail"]
    native = _side(guest / "results" / NAME)
    table = comparison_table(uml, native)
    (tmp_path / "comparison-virtual.txt").write_text(table + "\n")
    print("\n" + table)
    assert sorted(uml) == sorted(native) and len(uml) == 4
    for rid, u in uml.items():
        n = native[rid]
        assert all(x["ok"] or disturbed(x) for x in (u, n)) and _seeds(u) == _seeds(n) and _seeds(n)["netem_down"], rid
        assert u["retrans"] == n["retrans"], rid
        for direction, c in common_draws(u["losses"], n["losses"]).items():
            assert c["a"] == c["b"], (rid, direction, c)
        assert abs(n["plt_ms"] - u["plt_ms"]) <= PLT_VIRTUAL_TOLERANCE_MS, (rid, u["plt_ms"], n["plt_ms"])
