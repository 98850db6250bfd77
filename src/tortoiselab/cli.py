"""The `tortoise` command."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import shutil
import signal
import sys
from pathlib import Path

from tortoiselab.host.backends import LabError
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.stopping import interrupted
from tortoiselab.spec import cols
from tortoiselab.spec.ccparams import ParamError, parse_assignments
from tortoiselab.spec.experiment import ExperimentError, expand, load
from tortoiselab.spec.pathspec import PathError, parse_path
from tortoiselab.spec.topologies import parse_topology
from tortoiselab.spec.regionfiles import load_regions
from tortoiselab.spec.regiontable import format_regions_table

NO_DATA_EXIT = 5  # tortoise report --reproduction: a seed sentence's primary reading has no runs (docs/running.md, "Exit codes")
LAZY_IMPORTS = ("each subcommand imports the layers it needs inside its function: the host's modules pull in "
                "pandas and the report matplotlib (1-1.5 s), while `tortoise --help` and `validate` start in 0.2 s")


def _sigterm_as_interrupt(signum, frame):  # so the lab's finally-blocks run; the runner names the signal
    raise KeyboardInterrupt("SIGTERM")


def cmd_probe(a: argparse.Namespace) -> int:
    from tortoiselab.host.probe import run_probe

    fields = {"rtt_ms": a.rtt_ms, "loss_pct": a.loss_pct, "rate_mbit": a.rate_mbit,
              "jitter_ms": a.jitter_ms}
    for k in ("queue_pkts", "loss_up_pct", "loss_burst_pkts", "loss_burst_up_pkts", "trace_down", "trace_up",
              "trace_queue_ms"):
        if getattr(a, k) is not None:
            fields[k] = getattr(a, k)
    path = parse_path(fields)
    measure = {"loss_probes": a.loss_probes, **({"bulk_seconds": a.bulk_seconds} if a.bulk_seconds else {}),
               **({"trace_window_s": tuple(a.trace_window)} if a.trace_window else {})}
    module_params = parse_assignments(a.module_param)
    topology = parse_topology(a.topology)
    rep = run_probe(path, cc=a.cc, backend=a.backend, clock=a.clock,
                    work=Path(a.work) if a.work else None, measure=measure, switch=a.switch, seed=a.seed,
                    module_params=module_params, topology=topology)
    print(json.dumps(rep.as_dict(), indent=1) if a.json else rep.text())
    print(f"\n(work folder: {rep.work})", file=sys.stderr)
    return 0 if rep.ok else 3


def cmd_cc_check(a: argparse.Namespace) -> int:
    from tortoiselab.host.probe import run_cc_check

    res = run_cc_check(a.algorithms or None, backend=a.backend, clock=a.clock)
    bad = 0
    print(f"backend {res['backend']}, clock {res['clock']}, kernel {res.get('kernel_release')}"
          + (f", uml userspace {res['uml_userspace']}" if res.get("uml_userspace") else ""))
    print(f"{'selected':<12} {'socket says':<12} {'ss -ti says':<14} ok")
    for cc, r in res["algorithms"].items():
        ok = r["sockopt"] == cc and any(s is not None and s.split("-")[0] == cc for s in r["ss"])
        bad += not ok
        print(f"{cc:<12} {r['sockopt']:<12} {','.join(map(str, r['ss'])):<14} {'yes' if ok else 'NO'}")
    return 0 if bad == 0 else 3


def cmd_loss_response(a: argparse.Namespace) -> int:
    from tortoiselab.host import lossresponse

    rows, meta = lossresponse.run(backend=a.backend, clock=a.clock, work=Path(a.work) if a.work else None)
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
    else:
        print(f"backend {meta['backend']}, clock {meta['clock']}, kernel {meta['kernel_release']}"
              + (f", uml userspace {meta['uml_userspace']}" if meta.get("uml_userspace") else ""))
        for alg, ps in sorted(meta["modules"].items()):
            print(f"module tcp_{alg}: " + " ".join(f"{k}={v}" for k, v in ps.items()))
        print(f"path: {lossresponse.PATH.rtt_ms:g} ms, {lossresponse.PATH.rate_mbit:g} Mbit/s, no random loss; "
              f"data segment #{lossresponse.DROP_NTH} dropped\n")
        print(lossresponse.format_rows(rows))
    print(f"\n(work folder: {meta['work']})", file=sys.stderr)
    return 0 if all(r[cols.OK] for r in rows) else 3


def cmd_pageload(a: argparse.Namespace) -> int:
    # here, not at the top: the CLI starts fast; the lab's front-end loads for lab commands only
    from tortoiselab.host.pageload import one_load, run_loads

    path = parse_path({"rtt_ms": a.rtt_ms, "loss_pct": a.loss_pct, "rate_mbit": a.rate_mbit})
    staged = None
    if a.site:  # an imported site (docs/your-own-site.md), checked and staged with its PKI
        import tempfile

        from tortoiselab.host.sites import load_site, stage
        load_site(Path(a.sites), a.site)  # refused before anything is made
        staged = Path(tempfile.mkdtemp(prefix="tortoise-site-")) / "site"
    try:
        if staged is not None:
            a.url = stage(Path(a.sites), a.site, staged)[0]["page"]
        load = one_load("load", {"cc": a.cc, "initcwnd_pkts": a.initcwnd, "initrwnd_pkts": a.initrwnd,
                                 "protocol": a.server_protocol, "tls": a.tls, "cert": a.cert},
                        {"page": a.page, "url": a.url, "loader": a.loader, "coalescing": not a.no_coalescing,
                         "cache_hit_ratio": a.cache_hit_ratio, "resolution": a.resolution, "protocol": a.protocol},
                        seed=a.seed)
        res = run_loads([load], path, backend=a.backend, clock=a.clock, work=Path(a.work) if a.work else None,
                        seed=a.seed, imported_dir=staged)
    finally:
        if staged is not None:
            shutil.rmtree(staged.parent)
    ld = res["loads"][0]
    s = ld["summary"]
    if a.json:
        print(json.dumps({"backend": res["backend"], "clock": res["clock"], **ld}, indent=1))
    else:
        print(f"backend {res['backend']}, clock {res['clock']}; {a.loader} loading {load.client.target()}")
        for k in ("error", cols.PLT, "plt_from_request_ms", cols.CDT, "ttfb_ms", "dns_ms",
                  "requests", "bytes", "connections_opened", "reuse_ratio", cols.THROUGHPUT):
            if k in s:
                print(f"  {k:<22} {s[k]}")
        for c in ld["connections"]:
            print(f"  capture: {c['client']} -> {c['server']}: TCP RTT {c['tcp_rtt_ms']} ms, "
                  f"TLS {c['tls_ms']} ms = {c['tls_rtts']} RTT")
        print(f"  HAR {ld['har']}\n  pcap {ld['pcap']} ({ld['capture']})")
    return 0 if not s.get("error") else 3


def cmd_validate(a: argparse.Namespace) -> int:
    exp = load(Path(a.file))
    runs = expand(exp)
    axes = ", ".join(f"{k} ({len(v)})" for k, v in exp.sweep.items()) or "no sweep"
    print(f"{a.file}: ok: experiment {exp.name!r}, {len(runs)} runs ({axes}; {exp.repetitions} repetitions)")
    for name in exp.grids:
        g = load(Path(a.file), grid=name)
        print(f"  grid {name}: {len(expand(g))} runs -> results/{g.name}")
    for name in exp.maps:
        g = load(Path(a.file), grid=f"map-{name}")
        print(f"  map {name}: {len(expand(g))} runs -> results/{g.name} (tortoise map {a.file} --map {name})")
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    load(Path(a.file), grid=a.grid)  # a file refused (too large, spec/bounds.py) before the runner's imports
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from tortoiselab.host import runsummary, slurm
    from tortoiselab.host.runner import run_experiment
    from tortoiselab.host.shards import parse_shard

    if a.verify_determinism is not None:
        from tortoiselab.host.determinism import cli_verify

        return cli_verify(a)
    if a.executor == "slurm":
        if a.reuse_from:
            from tortoiselab.host import reuse

            n = len(reuse.take_locked(Path(a.file), a.grid, a.reuse_from, Path(a.results), a.backend, a.clock))
            print(f"reused {n} runs from grid {a.reuse_from} (host/reuse.py)")
        return slurm.cli_run(a)
    slurm.refuse_slurm_options(a)
    shard = parse_shard(a.shard) if a.shard else None
    console = Console(stderr=True)
    failures = [0]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  TextColumn("{task.fields[status]}"), console=console, transient=False) as prog:
        task = prog.add_task("runs", total=None, status="")

        def progress(rec: dict, n: int, total: int) -> None:
            failures[0] += 0 if rec[cols.OK] else 1
            prog.update(task, total=total, completed=n,
                        status=f"failed {failures[0]}; last {rec['run_id']} "
                               f"{'ok' if rec['ok'] else 'FAILED: ' + str(rec['error'])[:60]}")
            # a failed run's reason stays on the console (and in a log of it), not only in the status bar
            why = "" if rec[cols.OK] else f"\n  {rec['error']}"
            prog.console.print(f"{rec['run_id']} {'ok' if rec['ok'] else 'FAILED'}: {_time_budget(rec['meta'])}{why}",
                               markup=False)

        res = run_experiment(Path(a.file), Path(a.results), jobs=a.jobs, backend=a.backend, clock=a.clock,
                             limit=a.limit, on_progress=progress, grid=a.grid, shard=shard,
                             runs_file=Path(a.runs_file) if a.runs_file else None, reuse_from=a.reuse_from,
                             on_cleaned=lambda line: prog.console.print(f"clean: {line}", markup=False, soft_wrap=True),
                             sites=Path(a.sites), **({"batch": a.batch} if a.batch is not None else {}))
    import pandas as pd

    df = pd.read_parquet(res["table"])
    swept = [f for axis in load(Path(a.file), grid=a.grid).sweep for f in axis.split("+")]
    keys = runsummary.summary_keys(df, swept)
    t = Table(title=f"{res['experiment']}: {len(df)} of {res['total']} runs complete "
                    f"({res['backend']}, {res['clock']} clock)")
    for col in (" ".join(keys), *runsummary.HEADERS):
        t.add_column(col)
    for row in runsummary.summary_rows(df, keys):
        t.add_row(*row)
    Console().print(t)
    loads = [r["meta"].get("load_sim_seconds") or 0 for r in res["records"] if r.get(cols.OK)]
    if res["records"]:
        print(f"this invocation: {res['done_now']} runs in {res['wall_seconds']:.1f} s wall "
              f"({res['done_now'] / max(res['wall_seconds'], 1e-9) * 3600:.0f} runs/hour, jobs {res['jobs']}); "
              f"simulated page-load time / wall time {sum(loads) / max(res['wall_seconds'], 1e-9):.2f}")
    if res["reused"]:
        print(f"reused {res['reused']} runs from grid {a.reuse_from} (same run ids: the same configuration, "
              "repetition and seed)")
    print("".join(f"moved a damaged run aside (kept) and redid it: {m}\n" for m in res["moved_aside"])
          + "".join(f"moved a run whose lab was killed from outside aside (kept) and redid it: {m}\n"
                    for m in res.get("killed", []))
          + f"results: {res['dir']}  (runs table: {res['table']})")
    off = runsummary.disturbed_note(res["records"])
    if off:
        print(off)
    return runsummary.exit_code(res["records"])


def _time_budget(meta: dict) -> str:
    """A run's simulated (guest) time against its wall time: the page load's
    own, and the run's in all (its boot or, later in a batch, the idle wait
    for its start instant: nearly free on the virtual clock)."""
    sim, wall, load = meta.get("sim_seconds"), meta.get("wall_seconds"), meta.get("load_sim_seconds")
    if not sim or not wall:
        return f"{wall or 0:.1f} s wall"
    return (f"load {load or 0:.2f} s simulated in {wall:.1f} s wall ({(load or 0) / wall:.2f}x real time; "
            f"the run {sim:.1f} s simulated, {sim / wall:.1f}x)")


def cmd_ls(a: argparse.Namespace) -> int:
    from tortoiselab.host.listing import list_experiments

    rows = list_experiments(Path(a.results))
    if not rows:
        print(f"no experiments under {a.results}")
    for r in rows:
        total = r["total"] if r["total"] is not None else "?"
        print(f"{r['experiment']:<24} {r['done']}/{total} done, {r['failed']} failed, "
              f"{r['running']} running, {r['in_progress'] - r['running']} interrupted"
              + f", {r['damaged']} damaged" * bool(r["damaged"])
              + f", {r.get('foreign', 0)} not of this experiment (left out)" * bool(r.get("foreign"))
              + f" (tortoise verify {Path(a.results) / r['experiment']})" * bool(r["damaged"] or r.get("foreign")))
        for note in r.get("notes", []):
            print(f"{'':<24} {note}")
        if r.get("unknown"):  # the folder's experiment.yaml does not give its runs: named, the others listed
            print(f"{'':<24} total unknown: {r['unknown']}")
        for j in (r.get("slurm") or {}).get("jobs", []):
            print(f"{'':<24} slurm job {j['job_id']}: {j['tasks']} array tasks: " + ", ".join(
                f"{j[k]} {k}" for k in ("queued", "running", "done", "failed", "unknown") if j[k] or k != "unknown"))
        if r.get("slurm"):
            print(f"{'':<24} {r['slurm']['queued_runs']} runs queued in slurm tasks not yet over")
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    from tortoiselab.host.listing import find_run
    from tortoiselab.host.store import read_record

    d = find_run(Path(a.results), a.run_id)
    record = read_record(d)
    if a.json:
        print(record.model_dump_json(indent=1))
        return 0
    m = record.meta
    print(f"run {record.run_id} of {record.experiment}, repetition {record.repetition}, seed {record.seed}: "
          f"{'ok' if record.ok else 'FAILED: ' + str(record.error)}")
    print(f"point: {record.point}")
    print(f"backend {m.backend}, clock {m.clock}, kernel {m.kernel_release}, "
          f"{m.sim_seconds} s guest, {m.wall_seconds} s wall")
    for k, v in (record.summary.model_dump() if record.summary is not None else {}).items():
        if isinstance(v, (int, float, str)) or (v is None and k in cols.METRICS):  # a metric it lacks: None
            print(f"  {k:<22} {v}")
    print(f"files: {', '.join(sorted(p.name for p in d.iterdir()))}  in {d}")
    return 0


def cmd_clean(a: argparse.Namespace) -> int:
    from tortoiselab.host.locks import clean_results, left_for_you

    lines, n = clean_results(Path(a.results))
    yours = left_for_you(lines)  # exit 1: something left in place needs you (docs/running.md, "Exit codes")
    print("\n".join([*lines, f"clean: {n} actions; completed runs untouched"
                      + f"; {len(yours)} left in place for you to remove (see the lines above)" * bool(yours)]))
    return 1 if yours else 0


def cmd_report(a: argparse.Namespace) -> int:
    from tortoiselab.report import write_report  # here, not at the top: the CLI starts fast (pandas, matplotlib)

    if a.reproduction:
        return _report_reproduction(a)
    if a.experiment is None:
        raise RunnerError("experiment: name an experiment (or its results folder), or give --reproduction")
    d = Path(a.experiment)
    if not d.is_dir():
        d = Path(a.results) / a.experiment
    if not (d / "runs.parquet").exists() and not any(d.glob("*/run.json")):
        raise RunnerError(f"experiment: no results in {d}; run it first with tortoise run")
    from tortoiselab.host.verify import admitted
    from tortoiselab.report import floor_table, format_floor_table, load_context  # as above: the CLI starts fast

    with admitted([d], a.skip_damaged, f"tortoise report {d}", Path(a.sites)) as left_out:
        out, ctx = write_report(d, Path(a.out) if a.out else None), load_context(d)
        print("\n".join([*(f"note: {n}" for n in ctx.notes), format_floor_table(floor_table(ctx))]))
    print("\n".join([*left_out, f"report: {out}"]))
    return 0


def cmd_grade(a: argparse.Namespace) -> int:
    from tortoiselab.course.grade import complete, format_grade, grade, lab_results_folder
    from tortoiselab.course.handout import find_lab, load_lab
    from tortoiselab.host.batches import jobs_for
    from tortoiselab.host.verify import admitted

    lab = load_lab(find_lab(a.lab))
    try:
        jobs = jobs_for(a.jobs, "uml", "virtual")
    except ValueError as exc:
        raise RunnerError(f"--{exc}") from None
    folders = [lab_results_folder(Path(a.results), le.exp) for le in lab.experiments]
    with admitted(folders, a.skip_damaged, f"tortoise grade {a.lab} {a.results}", Path(a.sites)) as left_out:
        sections = grade(lab, Path(a.results), audit_k=a.audit, audit_seed=a.audit_seed, jobs=jobs,
                         sites_dir=Path(a.sites))
    print("\n".join([format_grade(lab, sections), *left_out]))
    return 0 if complete(sections) else 1


def _report_reproduction(a: argparse.Namespace) -> int:
    """REPRODUCTION.md: every seed claim against the studies' results."""
    from tortoiselab.host.verify import admitted  # here: the CLI starts fast (the studies load scipy)
    from tortoiselab.studies.reproduction import folders_read, reproduction

    out = Path(a.out or "REPRODUCTION.md")
    grid = None if a.grid == "full" else a.grid
    with admitted(folders_read(Path(a.results), grid), a.skip_damaged, "tortoise report --reproduction",
                  Path(a.sites)) as left_out:
        text, lacking = reproduction(Path(a.results), grid)
    print("\n".join(left_out)) if left_out else None
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    print(next(line for line in text.splitlines() if line.startswith("**")))
    print(f"reproduction report: {out}")
    if lacking:
        print(f"tortoise report --reproduction: {len(lacking)} seed sentences lack data ({', '.join(lacking)}): "
              "run their experiments (make reproduce), then report again")
        return NO_DATA_EXIT
    return 0


def cmd_plan(a: argparse.Namespace) -> int:
    """Runs needed per claim for 80 % power, from a pilot's results; with
    --check, that plan against the powered grid that was run."""
    from tortoiselab.studies import plan as P  # here: the CLI starts fast (the studies load scipy)
    from tortoiselab.studies import plan_check as PC

    if a.jobs < 1 or a.nodes < 1 or a.max_repetitions < 1 or a.max_users < 2:
        raise ValueError("--jobs, --nodes and --max-repetitions: give a whole number >= 1 (--max-users: >= 2)")
    conf = P.SPREAD_CONFIDENCE if a.spread_confidence is None else a.spread_confidence
    if not 0.5 <= conf < 1:
        raise ValueError(f"--spread-confidence: give a confidence from 0.5 to below 1 (default "
                         f"{P.SPREAD_CONFIDENCE}), not {conf}")
    grid = None if a.grid == "full" else a.grid
    if grid and grid.startswith("map-"):  # a sensitivity map's cost (docs/maps.md)
        from tortoiselab.studies.maprun import plan_text

        print(plan_text(a.experiment, grid, Path(a.pilot), a.jobs))
        return 0
    if a.check:
        rows, info = PC.check(a.experiment, grid, a.check, a.pilot, confidence=conf)
        print(PC.format_check(rows, info))
        return 0
    rows, info = P.plan(a.experiment, grid, a.pilot, confidence=conf)
    print(P.format_plan(rows, info, a.jobs, a.nodes, a.max_repetitions, a.max_users))
    if a.yaml:
        reps, note = (P.users_needed(rows, a.max_users) if info["users"] else
                      P.repetitions_needed(rows, a.max_repetitions))
        if reps is not None:
            print(f"\n# add under grids: in {info['file'].name}\n" + P.powered_grid(info, reps, note))
    return 0


SENSITIVITY_FILE = "population-sensitivity.md"


def cmd_population_sensitivity(a: argparse.Namespace) -> int:
    """How far each population assumption moves a claim's verdict, on an
    experiment's sensitivity grid (studies/population_sensitivity.py)."""
    from tortoiselab.host.store import files
    from tortoiselab.studies import population_sensitivity as PS

    text = "\n".join(PS.report(e, a.results, a.grid) for e in a.experiment)
    if not a.write:
        print(text)
        return 0
    # whole, no link followed: a results folder is untrusted (docs/faults.md, host/store/files.py)
    out = files.write_results_file(Path(a.results), SENSITIVITY_FILE, text + "\n", "writing the population sensitivity")
    print(f"wrote {out}")
    return 0


def cmd_map(a: argparse.Namespace) -> int:
    from tortoiselab.studies.maprun import run_maps  # here: the CLI starts fast (runner, scipy, matplotlib)

    return run_maps(a.experiment, a.map or None, Path(a.results), a.jobs, a.backend, a.clock, a.plan)


def cmd_verify(a: argparse.Namespace) -> int:
    from tortoiselab.host.verifycli import cli_verify

    return cli_verify(Path(a.folder), a.rebuild_table, a.adopt_unmanifested, Path(a.sites))


def cmd_site_import(a: argparse.Namespace) -> int:
    from tortoiselab.host.sites import import_har  # here: the CLI starts fast (LAZY_IMPORTS)

    groups = [[h.strip().lower() for h in g.split(",") if h.strip()] for g in a.group] or None
    got = import_har(Path(a.har), Path(a.sites), a.name, tokens=frozenset(a.drop_query), groups=groups)
    s, t = got.site, got.site["totals"]
    print(f"site {s['name']!r} {'made' if got.created else 'already there, unchanged'}: {got.folder} "
          f"(id {got.site_id[:16]})")
    print(f"  page {s['page']}: {t['requests']} requests, {t['bytes']:,} bytes of bodies, {t['hosts']} hosts on "
          f"{t['addresses']} addresses, {t['certificates']} certificates ({s['certificates_from']}), "
          f"{s['recorded_connections']} recorded connections")
    for origin, o in s["origins"].items():
        print(f"  {origin:<44} {o['protocol']:<9} {o['ip']:<11} {o['certificate'] or '-'}")
    if s["never_copied"]:
        print("  never copied: " + ", ".join(f"{k} ({n})" for k, n in s["never_copied"].items())
              + f"; {s['credential_values_replaced']} credential value(s) replaced in bodies and headers")
    for n in s["notes"]:
        print(f"  note: {n}")
    return 0


def cmd_regions(a: argparse.Namespace) -> int:
    print(format_regions_table(load_regions()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tortoise", description="Tortoise Lab: TCP and HTTP/2 on long, lossy paths")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def lab_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", default="auto", choices=["auto", "native", "uml"])
        p.add_argument("--clock", default="auto", choices=["auto", "real", "virtual"],
                       help="uml only: virtual = time-travel (CPU costs no simulated time); auto = virtual on uml")

    p = sub.add_parser("probe", help="boot the lab and measure one path against its configuration")
    lab_opts(p)
    p.add_argument("--rtt-ms", type=float, default=200.0)
    p.add_argument("--loss-pct", type=float, default=1.0)
    p.add_argument("--rate-mbit", type=float, default=10.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--queue-pkts", type=int, default=None)
    p.add_argument("--loss-up-pct", type=float, default=None, help="client-to-server loss if it differs")
    p.add_argument("--loss-burst-pkts", type=float, default=None,
                   help="mean loss-burst length: bursty (Simple Gilbert) loss instead of random")
    p.add_argument("--loss-burst-up-pkts", type=float, default=None,
                   help="client-to-server mean loss-burst length if it differs")
    p.add_argument("--trace-down", help="server-to-client capacity trace: a mahimahi file or a shipped "
                                        "trace (topologies/traces: lte.down, 3g.down); see docs/traces.md")
    p.add_argument("--trace-up", help="client-to-server capacity trace (lte.up, 3g.up, or a file)")
    p.add_argument("--trace-queue-ms", type=float, default=None,
                   help="a traced link's buffer in ms at the trace's mean rate (default one BDP)")
    p.add_argument("--cc", default="cubic", help="server's congestion control algorithm")
    p.add_argument("--topology", default="wan", metavar="NAME[,ARG,...,K=V]",
                   help="a topology of the lab with its parameters, as mn's --topo: wan, "
                        "dumbbell,2,bulk_flows=1, cellular,trace_down=3g.down (docs/topologies.md)")
    p.add_argument("--switch", default="ovs", choices=["ovs", "bridge"])
    p.add_argument("--bulk-seconds", type=float, default=None,
                   help="the bulk transfer of an untraced path (default 10); a traced path's lasts its trace window")
    p.add_argument("--trace-window", type=float, nargs=2, default=None, metavar=("START_S", "END_S"),
                   help="a traced path: replay and check this part of the trace (s from its start); "
                        "default the whole trace (docs/traces.md)")
    p.add_argument("--loss-probes", type=int, default=4000, help="UDP probes per direction")
    p.add_argument("--module-param", action="append", default=[], metavar="ALG.PARAM=VALUE",
                   help="a parameter of our modules for this run, e.g. reno_beta.beta=0.8 (repeatable)")
    p.add_argument("--seed", type=int, default=1, help="seed of netem's loss draws (per direction, derived)")
    p.add_argument("--work", help="folder for the run's files (default: a new temporary folder)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("loss-response", help="each algorithm's cwnd reduction after exactly one loss")
    lab_opts(p)
    p.add_argument("--work")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_loss_response)

    p = sub.add_parser("pageload", help="load one page over an emulated path (Apache h2 + TLS in the lab)")
    lab_opts(p)
    p.add_argument("--rtt-ms", type=float, default=100.0)
    p.add_argument("--loss-pct", type=float, default=0.0)
    p.add_argument("--rate-mbit", type=float, default=10.0)
    p.add_argument("--cc", default="cubic")
    p.add_argument("--initcwnd", type=int, default=10)
    p.add_argument("--initrwnd", type=int, default=None)
    p.add_argument("--server-protocol", default="h2", choices=["h2", "h1"], help="Apache: h2 (+http/1.1) or h1 only")
    p.add_argument("--tls", default="1.3", choices=["1.3", "1.2"])
    p.add_argument("--cert", default="shared", choices=["shared", "separate", "large"])
    p.add_argument("--page", default="feed.html",
                   help="tiny.html, small.html, medium.html, large.html, feed.html, base.html")
    p.add_argument("--url", default=None, help="any URL instead of --page (e.g. objects/1000000.bin for h2load)")
    p.add_argument("--loader", default="loader", choices=["loader", "nghttp", "h2load"])
    p.add_argument("--site", default=None, help="an imported site's name (tortoise site import): its page, "
                   "origins and certificates instead of the lab's (docs/your-own-site.md)")
    p.add_argument("--sites", default="sites", help="where imported sites are kept (default: ./sites)")
    p.add_argument("--protocol", default=None, choices=["h2", "h1"], help="client side (default: the server's)")
    p.add_argument("--no-coalescing", action="store_true")
    p.add_argument("--cache-hit-ratio", type=float, default=0.0)
    p.add_argument("--resolution", default="same-ip", choices=["same-ip", "two-ip"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_pageload)

    p = sub.add_parser("validate", help="check an experiment file; every error with its path")
    p.add_argument("file")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run an experiment's pending runs (resumable)")
    lab_opts(p)
    p.add_argument("file")
    p.add_argument("--jobs", type=int, default=None,
                   help="lab instances side by side (uml; default: one per CPU on the virtual clock, else 1)")
    p.add_argument("--limit", type=int, default=None, help="at most this many pending runs")
    p.add_argument("--batch", type=int, default=None, metavar="N",
                   help="at most N runs share one lab boot, each stored as its load ends; the batches are fixed "
                        "by the experiment file and N (near-equal, at least two per sweep; default 16; 1: every "
                        "run alone, its packets independent of other runs: host/batches.py, docs/determinism.md "
                        "'Batches')")
    p.add_argument("--grid", default=None, help="one of the file's grids (e.g. ci, reduced); results go to "
                                                "results/<name>@<grid>; default: the file's own sweep")
    p.add_argument("--results", default="results")
    p.add_argument("--shard", default=None, metavar="i/N",
                   help="only the i-th of N disjoint slices of the sweep (every N-th run in the sweep's order, "
                        "from the i-th), for any scheduler or a loop")
    p.add_argument("--runs-file", default=None, metavar="FILE",
                   help="only the runs whose ids FILE lists, one per line (--shard then slices this list); "
                        "the Slurm executor's array tasks use it")
    p.add_argument("--executor", default="local", choices=["local", "slurm"],
                   help="slurm: submit the pending runs as a job array (see docs/cluster.md)")
    p.add_argument("--partition", default=None, help="slurm: the partition (sbatch --partition)")
    p.add_argument("--array-parallelism", type=int, default=None, metavar="N",
                   help="slurm: at most N array tasks at once (sbatch --array=...%%N); default: no limit")
    p.add_argument("--time", default=None, help="slurm: time limit per array task, e.g. 2:00:00")
    p.add_argument("--mem", default=None, help="slurm: memory per array task, e.g. 2G")
    p.add_argument("--wait", action="store_true", help="slurm: wait until the job is over, then report")
    p.add_argument("--sites", default="sites", help="where imported sites are kept, for client.site "
                   "(default: ./sites; docs/your-own-site.md)")
    p.add_argument("--reuse-from", default=None, metavar="GRID",
                   help="first take the runs this other grid of the file already did (same run id: the same "
                        "configuration, repetition and seed), hard-linked from its folder; ok runs only")
    p.add_argument("--verify-determinism", type=int, nargs="?", const=2, default=None, metavar="N",
                   help="rerun N (default 2) completed runs, chosen by the experiment's seed, into a scratch "
                        "folder and compare them with the stored ones (virtual clock only); exit 3 on a difference")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("ls", help="experiments and their progress")
    p.add_argument("--results", default="results")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("show", help="one run's record")
    p.add_argument("run_id")  # not a column: the argument's name
    p.add_argument("--results", default="results")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("clean", help="remove what interrupted runs left (by their recorded ids)")
    p.add_argument("--results", default="results")
    p.set_defaults(func=cmd_clean)

    p = sub.add_parser("report", help="write a self-contained HTML report of an experiment's runs")
    p.add_argument("experiment", nargs="?", help="experiment name (under --results) or its results folder")
    p.add_argument("--results", default="results")
    p.add_argument("--out", default=None)
    p.add_argument("--reproduction", action="store_true",
                   help="instead: REPRODUCTION.md, every seed claim against the studies' results (--out to change)")
    p.add_argument("--grid", default="reduced", help="with --reproduction: the grid whose results to read "
                                                     "(ci, reduced, or full for the files' own sweeps; a list such as "
                                                     "powered,reduced: per experiment, the first its file defines)")
    p.add_argument("--skip-damaged", action="store_true", help="go on without the damaged runs, naming them")
    p.add_argument("--sites", default="sites", help="where imported sites are kept: a folder's staged copies "
                                                    "(client.site) are compared with them (default: ./sites)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("plan", help="runs each claim of an experiment needs for 80 %% power, from a pilot's spread "
                                    "(--check: that plan against the powered grid that was run)")
    p.add_argument("experiment", help="experiment file or name (experiments/tortoise.yaml or tortoise)")
    p.add_argument("--grid", default="reduced", help="the pilot's grid (its results are the pilot; full: the file's "
                                                     "own sweep)")
    p.add_argument("--pilot", "--results", dest="pilot", default="results",
                   help="the results root that holds the pilot's runs (and with --check the powered grid's)")
    p.add_argument("--jobs", type=int, default=1, help="runs side by side on this machine (for the cost)")
    p.add_argument("--nodes", type=int, default=10, help="Slurm array tasks at once, one lab each (for the cluster's cost)")
    p.add_argument("--max-repetitions", type=int, default=200, help="cap of the powered grid's repetitions")
    p.add_argument("--max-users", type=int, default=200, help="a population's cap of users per market (what fits)")
    p.add_argument("--spread-confidence", type=float, default=None,
                   help="one-sided confidence of the upper bound of the pilot's spread that the repetitions are "
                        "planned on (default 0.8: studies/plan.py, spread_factor)")
    p.add_argument("--yaml", action="store_true", help="also print the `powered` grid block for the experiment file")
    p.add_argument("--check", metavar="GRID", default=None,
                   help="instead: per claim, the power the pilot predicted at GRID's pairs (observed spread and "
                        "upper bound) against the power GRID's own runs realise (e.g. --check powered)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("population-sensitivity", help="one-at-a-time: how far each population assumption "
                                                      "moves the verdicts over users (its grid sensitivity)")
    p.add_argument("experiment", nargs="+", help="population experiments (tortoise-population, "
                                                   "coalescing-population)")
    p.add_argument("--results", default="results")
    p.add_argument("--grid", default="sensitivity")
    p.add_argument("--write", action="store_true", help=f"write the tables to RESULTS/{SENSITIVITY_FILE} (no link "
                                                        "followed) instead of printing them")
    p.set_defaults(func=cmd_population_sensitivity)

    p = sub.add_parser("grade", help="is a course lab's results folder complete? what is missing, how to fix it")
    p.add_argument("lab", help="the lab handout: labs/01-tortoise.md, labs/01-tortoise or labs/01")
    p.add_argument("results", nargs="?", default="results",
                   help="the lab's results folder (results/<experiment>@<grid>) or the results root (default)")
    p.add_argument("--audit", type=int, default=None, metavar="K", help="rerun a sample of K runs per experiment "
                   "instead of every run (the default) on the virtual clock, and print what the sample catches; "
                   "0: rerun none, a quick look that verifies no number (docs/course-labs.md)")
    p.add_argument("--audit-seed", type=int, metavar="S", help="picks the sampled runs (default: a new seed, printed)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="labs side by side for the reruns (default: one per CPU, as tortoise run on the virtual clock)")
    p.add_argument("--skip-damaged", action="store_true", help="as report's")
    p.add_argument("--sites", default="sites", help="where imported sites are kept: a folder's staged copies "
                                                    "(client.site) are compared with them (default: ./sites)")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("map", help="run and draw an experiment's sensitivity maps (maps: in its file, docs/maps.md)")
    lab_opts(p)
    p.add_argument("experiment", help="experiment file or name (experiments/tortoise.yaml or tortoise)")
    p.add_argument("--map", action="append", default=[], help="one of the file's maps (repeatable); default: all")
    p.add_argument("--results", default="results")
    p.add_argument("--jobs", type=int, default=None, help="lab instances side by side (as tortoise run)")
    p.add_argument("--plan", action="store_true", help="only print each map's cells, runs and expected wall time")
    p.set_defaults(func=cmd_map)

    p = sub.add_parser("verify", help="check every run's manifest and record and runs.parquet against them")
    p.add_argument("folder", help="an experiment's results folder, or a results root")
    p.add_argument("--rebuild-table", action="store_true", help="rewrite runs.parquet from the run records")
    p.add_argument("--adopt-unmanifested", action="store_true",
                   help="write manifests for runs stored before manifests (format 3 or older), trusting their "
                        "files as they are now")
    p.add_argument("--sites", default="sites", help="where imported sites are kept: a folder's staged copies "
                                                    "(client.site) are compared with them (default: ./sites)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("site", help="your own site: a recorded page (HAR) made into a site (docs/your-own-site.md)")
    site_sub = p.add_subparsers(dest="site_cmd", required=True)
    p = site_sub.add_parser("import", help="make a site of a HAR 1.2 file (DevTools: Save all as HAR with content)")
    p.add_argument("har", help="the page's .har file")
    p.add_argument("--name", default=None, help="the site's name (default: the file's stem)")
    p.add_argument("--sites", default="sites", help="where sites are kept (default: ./sites)")
    p.add_argument("--drop-query", action="append", default=[], metavar="PARAM",
                   help="a query parameter whose values are tokens: replaced by x's (repeatable)")
    p.add_argument("--group", action="append", default=[], metavar="HOST,HOST,...",
                   help="hosts one certificate covers, instead of the recorded connections' grouping (repeatable)")
    p.set_defaults(func=cmd_site_import)

    p = sub.add_parser("regions", help="the region path profiles (topologies/regions.yaml + yours)")
    p.set_defaults(func=cmd_regions)

    p = sub.add_parser("cc-check", help="select each algorithm on the server and confirm it with ss -ti")
    lab_opts(p)
    p.add_argument("algorithms", nargs="*")
    p.set_defaults(func=cmd_cc_check)
    return ap


def main(argv: list[str] | None = None) -> int:
    """The command line (argv None: this process's own, which ends when
    main returns: then the interpreter's exit skips its garbage
    collections over the objects alive, `gc.freeze`; they cost ~0.3 s
    after `tortoise run`'s imports, docs/speed.md)."""
    a = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.INFO, format="%(message)s")
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return a.func(a)
    except (PathError, LabError, ParamError, ExperimentError, RunnerError, ValueError) as exc:
        print(f"tortoise: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM (_sigterm_as_interrupt): say what was stopped
        what, code = interrupted(exc)
        print(f"tortoise: {what}", file=sys.stderr)
        return code
    finally:
        if argv is None:
            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
