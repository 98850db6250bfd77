"""The Vagrant VM, exercised as far as a machine without a hypervisor can:
the Vagrantfile validates (Debian's vagrant, plus its vagrant-libvirt plugin
for the libvirt block and Vagrant's own VirtualBox config class for the
VirtualBox block), its provisioning runs the README's `make setup`, our
modules build against the VM kernel's headers (plain and through DKMS), and
`make kernel-deb` is configured and dry-run checked.

What these tests need, `make setup-test` installs from Debian (make test
runs it; scripts/setup-test.sh): vagrant, vagrant-libvirt, dkms, and the
headers of the VM's pinned kernel. The tests install nothing: a missing
package fails its test, naming that target; they never skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

VAGRANTFILE = REPO / "Vagrantfile"
OUR_MODULES = sorted(p.stem for p in (REPO / "kernel" / "modules").glob("tcp_*.c"))

# Vagrant's own view of the Vagrantfile (its config classes, not a regex):
# provisioners, synced folders, networks, and the provider blocks, the
# VirtualBox one validated by VirtualBox's config class (VirtualBox itself
# is not needed for that).
DUMP_RB = r"""
require "vagrant"
require "json"
env = Vagrant::Environment.new(cwd: ARGV[0])
out = {}
%i[virtualbox libvirt].each do |prov|
  cfg = env.vagrantfile.machine_config(:default, prov, env.boxes, nil, false)[:config]
  pc = cfg.vm.get_provider_config(prov)
  if prov == :virtualbox
    out["box"] = cfg.vm.box
    out["box_version"] = cfg.vm.box_version.to_s
    out["provisioners"] = cfg.vm.provisioners.map do |p|
      c = p.config
      { "name" => p.name.to_s, "type" => p.type.to_s, "inline" => c.inline, "path" => c.path,
        "env" => c.env, "reboot" => c.reboot, "privileged" => c.privileged }
    end
    out["synced_folders"] = cfg.vm.synced_folders.map { |id, f| f.merge("id" => id) }
    out["networks"] = cfg.vm.networks.map { |t, o| { "type" => t.to_s, "options" => o } }
    errors = pc.validate(Struct.new(:config).new(cfg)).values.flatten
    out["virtualbox"] = { "customizations" => pc.customizations, "errors" => errors }
  else
    out["libvirt"] = { "cpus" => pc.cpus, "memory" => pc.memory, "driver" => pc.driver,
                       "cpu_mode" => pc.cpu_mode }
    out["box_url"] = cfg.vm.box_url
  end
end
puts JSON.generate(out)
"""


def _run(argv, timeout=600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def _installed(pkg: str) -> bool:
    p = _run(["dpkg-query", "-W", "-f=${Status}", pkg])
    return p.returncode == 0 and "install ok installed" in p.stdout


def _need(*pkgs: str) -> None:
    """Fail naming the make target that installs them, if Debian packages
    (name or name=version) are missing or at another version."""
    missing = [p for p in pkgs if not _installed(p.split("=")[0])
               or ("=" in p and _run(["dpkg-query", "-W", "-f=${Version}", p.split("=")[0]]).stdout
                   != p.split("=", 1)[1])]
    if missing:
        pytest.fail(f"missing Debian packages {missing}: `make setup-test` installs them (scripts/setup-test.sh; "
                    "make test runs it)")


def _vars(**env) -> dict[str, str]:
    p = _run(["bash", str(REPO / "kernel/deb/vars.sh")], env={**os.environ, **env})
    assert p.returncode == 0, p.stderr
    return dict(line.split("=", 1) for line in p.stdout.splitlines())


def _vm_headers() -> dict[str, str]:
    """The headers (and, as they depend on it, the image) of the VM's pinned kernel."""
    v = _vars()
    _need(f"{v['HEADERS_PKG']}={v['DEB_VERSION']}")
    assert Path(v["HEADERS_DIR"], ".config").is_file(), v["HEADERS_DIR"]
    return v


def _vagrant_env(tmp: Path, **extra) -> dict[str, str]:
    # keep Vagrant's state out of the clone and the home folder, no update check
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORTOISE_VM_", "TORTOISE_BOX", "TORTOISE_LAB_KERNEL", "VAGRANT_"))}
    return {**env, "VAGRANT_DOTFILE_PATH": str(tmp / "dot"), "VAGRANT_HOME": str(tmp / "home"),
            "VAGRANT_CHECKPOINT_DISABLE": "1", **extra}


def _vagrant_dump(tmp: Path, **extra) -> dict:
    _need("vagrant")
    rb = tmp / "dump.rb"
    rb.write_text(DUMP_RB)
    p = _run(["ruby", str(rb), str(REPO)], cwd=tmp, env=_vagrant_env(tmp, **extra), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def _setup_packages() -> set[str]:
    """The packages `make setup` installs (scripts/setup-system.sh's list)."""
    text = (REPO / "scripts/setup-system.sh").read_text()
    block = re.search(r"^packages=\((.*?)^\)", text, re.S | re.M)
    assert block, "packages=( ... ) not found in scripts/setup-system.sh"
    words = []
    for line in block.group(1).splitlines():
        words += line.split("#", 1)[0].split()
    pkgs = {w.strip('"').split("=")[0] for w in words}  # a pinned one: package=version
    pkgs.discard("${kernel_pkg}")
    pkgs.add("linux-source-6.12")
    assert {"mininet", "openvswitch-switch", "apache2"} <= pkgs
    return pkgs


def _apt_installed_by(text: str) -> set[str]:
    """Package words of every `apt-get install` in a script."""
    found = set()
    for m in re.finditer(r"apt-get\s+install\s+([^\n]*)", text.replace("\\\n", " ")):
        for w in m.group(1).split():
            if w.startswith("-") or w.startswith("#"):
                continue
            found.add(w.strip('"').split("=")[0])
    return found


# -- 1. vagrant validate --------------------------------------------------


def test_vagrant_validate(tmp_path):
    """`vagrant validate` with Debian's vagrant 2.3.4. Without a usable
    provider it refuses to validate at all ("No usable default provider"), so:
    --ignore-provider for everything but the provider blocks (box, synced
    folder, port forward, provisioners and their script paths); Debian's
    vagrant-libvirt plugin makes libvirt a provider Vagrant can validate
    against, which checks the libvirt block (unknown settings are errors);
    the VirtualBox block through VirtualBox's config class (test below)."""
    _need("vagrant", "vagrant-libvirt")
    dotdir_before = (REPO / ".vagrant").exists()
    for mode in ("fast", "full"):
        env = _vagrant_env(tmp_path, TORTOISE_VM_KERNEL=mode)
        p = _run(["vagrant", "validate", "--ignore-provider"], cwd=REPO, env=env, timeout=120)
        assert p.returncode == 0 and "validated successfully" in p.stdout, p.stdout + p.stderr
        p = _run(["vagrant", "validate"], cwd=REPO, env={**env, "VAGRANT_DEFAULT_PROVIDER": "libvirt"},
                 timeout=120)
        assert p.returncode == 0 and "validated successfully" in p.stdout, p.stdout + p.stderr
    # bad settings are refused by the Vagrantfile itself, naming the variable
    for var, val in (("TORTOISE_VM_KERNEL", "huge"), ("TORTOISE_VM_SYNC", "ftp"), ("TORTOISE_VM_MEMORY", "512"),
                     ("TORTOISE_BOX", "/nonexistent.box"), ("TORTOISE_VM_DRIVER", "xen"),
                     ("TORTOISE_LAB_KERNEL", "sometimes")):
        p = _run(["vagrant", "validate", "--ignore-provider"], cwd=REPO,
                 env=_vagrant_env(tmp_path, **{var: val}), timeout=120)
        assert p.returncode != 0 and var in p.stdout + p.stderr, (var, p.stdout + p.stderr)
    assert (REPO / ".vagrant").exists() == dotdir_before, "vagrant wrote .vagrant/ into the clone"


def test_vagrantfile_box_providers_folder_port(tmp_path):
    d = _vagrant_dump(tmp_path)
    assert d["box"] == "debian/bookworm64"
    assert re.fullmatch(r"12\.\d{8}\.\d+", d["box_version"]), d["box_version"]
    # VirtualBox: valid for VirtualBox's own config class; 2 vCPUs, 4 GiB
    vb = d["virtualbox"]
    assert vb["errors"] == []
    cmds = [[str(x) for x in c[1]] for c in vb["customizations"]]
    assert ["modifyvm", "id", "--cpus", "2"] in cmds and ["modifyvm", "id", "--memory", "4096"] in cmds, cmds
    assert d["libvirt"]["cpus"] == 2 and d["libvirt"]["memory"] == 4096
    assert d["libvirt"]["driver"] == "kvm"
    # the project at /vagrant; rsync keeps what the VM makes
    folders = {f["guestpath"]: f for f in d["synced_folders"]}
    f = folders["/vagrant"]
    assert f["hostpath"] == "." and f["type"] == "rsync"
    assert {"/.venv/", "/results/"} <= set(f["rsync__exclude"])
    # Jupyter on the host's localhost
    fwd = [n["options"] for n in d["networks"] if n["type"] == "forwarded_port"]
    assert any(o["guest"] == 8888 and o["host_ip"] == "127.0.0.1" for o in fwd), fwd
    # sizes are settings
    d2 = _vagrant_dump(tmp_path, TORTOISE_VM_CPUS="4", TORTOISE_VM_MEMORY="8192")
    assert (d2["libvirt"]["cpus"], d2["libvirt"]["memory"]) == (4, 8192)


def test_local_box_and_software_emulation(tmp_path):
    """TORTOISE_BOX swaps the public box for a local .box file (the one
    scripts/vm-box.sh builds), named after its cache folder; the public box
    stays the default. TORTOISE_VM_DRIVER=qemu: libvirt's software emulation."""
    box_dir = tmp_path / "bookworm64-0123456789abcdef"
    box_dir.mkdir()
    box = box_dir / "tortoiselab-bookworm64.box"
    box.write_bytes(b"")
    d = _vagrant_dump(tmp_path, TORTOISE_BOX=str(box), TORTOISE_VM_DRIVER="qemu")
    assert d["box"] == "tortoiselab/bookworm64-0123456789abcdef"
    assert d["box_url"] == [f"file://{box}"]
    assert d["libvirt"]["driver"] == "qemu" and d["libvirt"]["cpu_mode"] == "custom"
    default = _vagrant_dump(tmp_path)
    assert default["box"] == "debian/bookworm64" and default["box_url"] is None


# -- 4. provisioning = the README's set-up ---------------------------------


def test_provisioning_runs_the_readme_setup(tmp_path):
    readme = (REPO / "README.md").read_text()
    # the README's set-up: `make setup`, which both of its entry points call
    assert "`make setup`" in readme and "make experiment" in readme
    target = "setup"
    assert re.search(rf"^{target}:", (REPO / "Makefile").read_text(), re.M)

    for mode in ("fast", "full"):
        prov = _vagrant_dump(tmp_path, TORTOISE_VM_KERNEL=mode)["provisioners"]
        names = [p["name"] for p in prov]
        assert names == ["bootstrap", "setup", "kernel", "reboot", "verify"], names
        assert all(p["type"] == "shell" and p["privileged"] for p in prov)
        by = {p["name"]: p for p in prov}
        # exactly the README's target, in the synced project, and nothing else
        setup_cmds = [p for p in prov if re.search(rf"\bmake\b.*\s{target}\b", p["inline"] or "")]
        assert [p["name"] for p in setup_cmds] == ["setup"]
        assert by["setup"]["inline"].strip() == f"make -C /vagrant {target}"
        assert by["kernel"]["inline"].split()[-1] == mode
        assert by["kernel"]["env"]["TORTOISE_VM_KERNEL"] == mode
        assert by["reboot"]["reboot"] is True
        assert by["verify"]["path"] == "vagrant/verify.sh"
    # the UML lab kernel only on request (the VM runs the native backend)
    prov = _vagrant_dump(tmp_path, TORTOISE_LAB_KERNEL="always")["provisioners"]
    assert [p["name"] for p in prov][-1] == "lab-kernel"
    assert prov[-1]["inline"].strip() == "make -C /vagrant kernel"

    # no second copy of the install steps: provisioning installs none of
    # make setup's packages itself (only make, the VM kernel, its headers, dkms)
    setup_pkgs = _setup_packages()
    scripts = [REPO / "Vagrantfile", *sorted((REPO / "vagrant").glob("*.sh"))]
    installed = set()
    for s in scripts:
        installed |= _apt_installed_by(s.read_text())
    assert installed, "no apt-get install found at all"
    assert not installed & setup_pkgs, installed & setup_pkgs
    assert installed <= {"make", "$IMAGE_PKG", "$HEADERS_PKG", "dkms"}, installed


# -- 2. our modules against the VM kernel's headers --------------------------


def test_modules_build_against_vm_kernel_headers():
    v = _vm_headers()
    build = Path(tempfile.mkdtemp(prefix="tortoise-vmmod-"))
    try:
        p = _run(["make", "-C", str(REPO / "kernel"), "modules", f"KDIR={v['HEADERS_DIR']}", f"BUILD={build}"])
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        assert "warning" not in out.lower(), out
        assert sorted(x.stem for x in build.glob("*.ko")) == OUR_MODULES
        for m in OUR_MODULES:
            info = _run(["modinfo", "-F", "vermagic", str(build / f"{m}.ko")]).stdout
            assert info.split()[0] == v["STOCK_RELEASE"], info
    finally:
        shutil.rmtree(build, ignore_errors=True)


def test_dkms_builds_modules_for_vm_kernel():
    """dkms add + build from kernel/ (kernel/dkms.conf) for the VM's kernel,
    in a private DKMS tree: the system's DKMS state and /lib/modules stay as
    they were."""
    v = _vm_headers()
    _need("dkms")
    rel = v["STOCK_RELEASE"]

    def system_state():
        mods = Path("/lib/modules") / rel
        return (sorted(str(p) for p in Path("/var/lib/dkms").rglob("*")) if Path("/var/lib/dkms").exists() else None,
                sorted(str(p) for p in (mods / "updates").rglob("*")) if (mods / "updates").exists() else None,
                sorted(str(p) for p in Path("/usr/src").glob(f"{v['DKMS_NAME']}-*")))

    before = system_state()
    work = Path(tempfile.mkdtemp(prefix="tortoise-dkms-"))
    try:
        p = _run(["bash", str(REPO / "kernel/deb/dkms.sh"), "check", rel, v["HEADERS_DIR"], str(work)])
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        assert f"{v['DKMS_NAME']}/{v['DKMS_VERSION']}, {rel}, x86_64: built" in out, out
        built = work / "tree" / v["DKMS_NAME"] / v["DKMS_VERSION"] / rel / "x86_64"
        kos = sorted(k.name.split(".")[0] for k in (built / "module").iterdir())
        assert kos == OUR_MODULES, kos
        log = (built / "log" / "make.log").read_text()
        # kernel/Makefile's recipe, against the VM kernel's headers, without warnings
        assert f"make -C {v['HEADERS_DIR']} M=" in log and "warning" not in log.lower(), log
        # DKMS copied kernel/ (its dkms.conf, Makefile and modules/) as the source tree
        src = work / "src" / f"{v['DKMS_NAME']}-{v['DKMS_VERSION']}"
        assert (src / "dkms.conf").is_file() and (src / "Makefile").is_file() and (src / "modules").is_dir()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert system_state() == before


def test_dkms_conf_and_boot_modules_cover_every_algorithm():
    v = _vm_headers()
    conf = (REPO / "kernel/dkms.conf").read_text()
    names = re.findall(r'^BUILT_MODULE_NAME\[\d+\]="([^"]+)"', conf, re.M)
    assert sorted(names) == OUR_MODULES
    # kernel/Makefile's default BUILD is build/modules under the (DKMS) source copy
    assert set(re.findall(r'^BUILT_MODULE_LOCATION\[\d+\]="([^"]+)"', conf, re.M)) == {"build/modules/"}
    assert re.search(r"^BUILD \?= \$\(CURDIR\)/build/modules$", (REPO / "kernel/Makefile").read_text(), re.M)
    assert re.search(r'^AUTOINSTALL="yes"$', conf, re.M)

    load = {ln.strip() for ln in (REPO / "vagrant/modules-load.conf").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}
    # every congestion control module of the VM's actual kernel (its modules.dep
    # and modules.builtin; the image came with the headers) loads at boot
    # every congestion control algorithm Debian's config for the VM kernel
    # builds as a module (CONFIG_TCP_CONG_X=m), by its object name in
    # net/ipv4/Makefile of the same source, loads at boot; and the VM
    # kernel's modules.dep has each of them
    cfg = Path(v["HEADERS_DIR"], ".config").read_text()
    as_module = set(re.findall(r"^CONFIG_(TCP_CONG_[A-Z0-9_]+)=m$", cfg, re.M))
    assert len(as_module) == 15, as_module
    mk = _run(["tar", "-xJOf", "/usr/src/linux-source-6.12.tar.xz", "linux-source-6.12/net/ipv4/Makefile"])
    assert mk.returncode == 0, mk.stderr
    obj = dict(re.findall(r"^obj-\$\(CONFIG_(TCP_CONG_[A-Z0-9_]+)\)\s*\+=\s*(tcp_[a-z0-9_]+)\.o$", mk.stdout, re.M))
    kernel_cc = {obj[s] for s in as_module}
    assert kernel_cc <= load, kernel_cc - load
    dep = (Path("/lib/modules") / v["STOCK_RELEASE"] / "modules.dep").read_text()
    for m in kernel_cc:
        assert re.search(rf"^kernel/net/ipv4/{m}\.ko", dep, re.M), m
    assert set(OUR_MODULES) <= load
    assert "sch_netem" in load
    # netem as a module too: what host_can_emulate reads from /boot/config-*
    assert re.search(r"^CONFIG_NET_SCH_NETEM=m$", cfg, re.M)


# -- 3. make kernel-deb, configured and dry-run checked --------------------


def _make_vm_target(target: str, **env) -> subprocess.CompletedProcess:
    top = (REPO / "Makefile").read_text()
    argv = ["make", "-C", str(REPO)]
    if "kernel/deb/Makefile.inc" not in top:
        argv += ["-f", "kernel/deb/Makefile.inc"]
    return _run([*argv, target], env={**os.environ, **env}, timeout=1200)


def test_kernel_deb_dry_run():
    v = _vars()
    cache = Path(tempfile.mkdtemp(prefix="tortoise-kdeb-"))
    try:
        p = _make_vm_target("kernel-deb-dry-run", TORTOISE_CACHE=str(cache))
        out = p.stdout + p.stderr
        assert p.returncode == 0, out[-6000:]
        # every fragment option held; only UML's own were skipped, by name
        assert re.search(r"config: \d+ fragment options hold; skipped as UML-only: "
                         r"HOSTFS UML_TIME_TRAVEL_SUPPORT STDERR_CONSOLE\n", out), out
        tree = next(cache.glob("kernel/deb-*/linux-source-6.12"))
        config = (tree / ".config").read_text()
        for sym in ("BIC", "CUBIC", "WESTWOOD", "HTCP", "HSTCP", "HYBLA", "VEGAS", "NV", "SCALABLE", "LP",
                    "VENO", "YEAH", "ILLINOIS", "DCTCP", "CDG", "BBR"):
            assert f"\nCONFIG_TCP_CONG_{sym}=y\n" in config, sym
        for m in OUR_MODULES:
            assert f"\nCONFIG_TCP_CONG_{m[len('tcp_'):].upper()}=m\n" in config, m
            assert (tree / "net/ipv4" / f"{m}.o").stat().st_size > 0
        assert "\nCONFIG_NET_SCH_NETEM=y\n" in config
        assert '\nCONFIG_LOCALVERSION="-tortoise"\n' in config and "\nCONFIG_DEBUG_INFO_NONE=y\n" in config
        # bindeb-pkg's packaging: the two packages the VM installs, build deps met
        assert (f"packaging: linux-headers-{v['LAB_RELEASE']} linux-image-{v['LAB_RELEASE']} linux-libc-dev"
                in out), out
        assert "build dependencies met" in out
        assert (tree / "debian/rules").is_file()
        # nothing big was built
        assert not (tree / "vmlinux").exists() and not list(cache.glob("kernel/deb-*/*.deb"))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_kernel_deb_check_refuses_a_folder_without_packages(tmp_path):
    p = _run(["bash", str(REPO / "kernel/deb/check-debs.sh"), str(tmp_path)])
    assert p.returncode == 1
    assert f"no linux-image-{_vars()['LAB_RELEASE']} / linux-headers-" in p.stderr, p.stderr
    assert "make kernel-deb-build" in p.stderr, p.stderr


def test_kernel_deb_packages_check():
    """The full build's packages, checked without installing them (kernel/deb/check-debs.sh):
    only where `make kernel-deb-build` has run for the current inputs (hours; the
    benchmark in kernel/deb/README.md), since the packages are cached by input hash."""
    out = Path(_run(["bash", str(REPO / "kernel/deb/build-deb.sh"), "--path"]).stdout.strip())
    if not (out / "BUILD_OK").is_file():
        pytest.skip(f"no full kernel build for the current inputs ({out}); make kernel-deb-build makes one")
    p = _run(["bash", str(REPO / "kernel/deb/check-debs.sh"), str(out)], timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
    for m in OUR_MODULES:
        assert f"check-debs: {m}: " in p.stderr and "vermagic " + _vars()["LAB_RELEASE"] in p.stderr
    assert "all symbols resolve" in p.stderr and "our modules build out of tree against them" in p.stderr


def test_top_makefile_has_vm_targets():
    """`make kernel-deb`, `kernel-deb-dry-run` and `vm-modules` from the project's Makefile."""
    p = _run(["make", "-C", str(REPO), "-n", "kernel-deb", "kernel-deb-dry-run", "vm-modules"], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "build-deb.sh install" in p.stdout and "build-deb.sh dry-run" in p.stdout
    # the packages are checked before they are installed
    assert p.stdout.index("check-debs.sh") < p.stdout.index("build-deb.sh install")
    assert "dkms.sh install" in p.stdout
