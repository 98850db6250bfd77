"""`tortoise regions`: the region profiles (spec/regions.py) as a table, one
row per profile, its values and which of them are assumptions."""

from __future__ import annotations

from tortoiselab.spec.regions import Profile, Regions


def _num(v: float) -> str:
    return f"{v:g}"

def _row(name: str, prof: Profile) -> list[str]:
    p = prof.path
    spec = p.to_pathspec()
    rtt = _num(p.rtt_ms) + (f"±{_num(p.jitter_ms)}" if p.jitter_ms else "")
    loss = _num(spec.loss_pct) if spec.loss_up == spec.loss_pct else f"{_num(spec.loss_pct)}/{_num(spec.loss_up)}"
    down_b, up_b = spec.burst_down_pkts, spec.burst_up_pkts
    if down_b is not None or up_b is not None:  # mean loss-burst lengths, packets ("-": random loss)
        b = [("-" if x is None else _num(x)) for x in (down_b, up_b)]
        loss += f" b{b[0]}" if down_b == up_b else f" b{b[0]}/{b[1]}"
    rate = f"{_num(spec.rate_mbit)}/{_num(spec.rate_up)}"
    if p.queue_ms is not None:
        queue = f"{spec.queue()} ({_num(p.queue_ms)} ms)"
    elif p.queue_pkts is not None:
        queue = str(p.queue_pkts)
    else:
        queue = f"{spec.queue()} (BDP)"
    assumed = f"{len(prof.assumptions())}/{len(prof.sourced())}"
    host = (prof.host or "-") + ("" if prof.background_load_pct is None else f" bg{_num(prof.background_load_pct)}%")
    return [name, rtt, loss, rate, queue, host, assumed, prof.description]

def format_regions_table(regions: Regions) -> str:
    """Every profile (name, RTT±jitter, loss down/up, rates down/up, queue in
    packets, assumption-marked values of values set, description), then the
    add-ons and the files read."""
    header = ["profile", "RTT ms", "loss %", "down/up Mbit/s", "queue pkts", "host", "assumed", "description"]
    rows = [_row(n, p) for n, p in regions.profiles.items()]
    out = _align([header, *rows])
    if regions.addons:
        out.append("")
        out += _align([["add-on", "+RTT ms", "source"],
                       *[[n, "+" + _num(a.add_rtt_ms), a.source] for n, a in regions.addons.items()]])
    out.append("")
    out.append(f"{len(rows)} profiles. assumed = values marked 'assumption' / values set; "
               "loss bN = in bursts of N packets on average (Simple Gilbert); "
               "queue (BDP) = no buffer given, one bandwidth-delay product; "
               "host = the client's (topologies/hosts.yaml, applied by client.host: region), "
               "bgN% = background load, recorded, not yet applied.")
    for f in regions.files:
        out.append(f"from {f}")
    return "\n".join(out)

def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
