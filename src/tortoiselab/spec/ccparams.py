"""Our congestion control modules' parameters, checked before anything
starts. The bounds are the ones the modules themselves enforce
(kernel/modules/tcp_*.c), so a bad value is refused here with the field's
name, and would be refused by the module too.

A run names parameters as ``<algorithm>.<parameter>=<value>``, e.g.
``reno_beta.beta=0.8`` or ``cubic_plus.n=2``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    low: float
    high: float
    kind: type  # float: decimal with up to 3 fractional digits; int
    default: float
    help: str


OUR_MODULES: dict[str, dict[str, Param]] = {
    "reno_beta": {
        "beta": Param(0.1, 0.9, float, 0.5, "multiplicative decrease: ssthresh = max(beta * cwnd, 2 segments)"),
    },
    "cubic_plus": {
        "beta": Param(0.5, 0.95, float, 0.7, "CUBIC's beta, before the CUBIC+ change"),
        "n": Param(1, 16, int, 6, "CUBIC+: beta' = 1 - (1 - beta)/n"),
        "rtt_aware": Param(0, 1, int, 0, "1: recovery time K scaled by 2R/(R + srtt)"),
        "rtt_ref_ms": Param(1, 10000, int, 100, "R, the reference RTT of the RTT-aware K"),
        "fast_convergence": Param(0, 1, int, 1, "RFC 9438 section 4.7"),
    },
}


class ParamError(ValueError):
    pass


def check_params(algorithm: str, params: dict[str, object], field: str = "params") -> dict[str, str]:
    """Validate one algorithm's parameters; return them as the strings the
    module takes (``0.800``, ``6``)."""
    if not params:
        return {}
    if algorithm not in OUR_MODULES:
        raise ParamError(f"{field}: {algorithm!r} takes no parameters here; only "
                         f"{', '.join(sorted(OUR_MODULES))} do")
    spec = OUR_MODULES[algorithm]
    out = {}
    for name, value in params.items():
        where = f"{field}.{algorithm}.{name}"
        if name not in spec:
            raise ParamError(f"{where}: unknown parameter; {algorithm} has {', '.join(sorted(spec))}")
        p = spec[name]
        try:
            x = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ParamError(f"{where}: {value!r} is not a number; give a value in [{p.low}, {p.high}]") from None
        if p.kind is int and x != int(x):
            raise ParamError(f"{where}: {value!r} must be a whole number in [{p.low:g}, {p.high:g}]")
        if not p.low <= x <= p.high:
            raise ParamError(f"{where}: {value!r} is outside [{p.low:g}, {p.high:g}] ({p.help})")
        if p.kind is float and round(x, 3) != x:
            raise ParamError(f"{where}: {value!r} has more than 3 decimals; the module takes thousandths")
        out[name] = f"{x:.3f}" if p.kind is float else str(int(x))
    return out


def parse_assignments(items: list[str]) -> dict[str, dict[str, str]]:
    """``["reno_beta.beta=0.8", "cubic_plus.n=2"]`` -> checked dict per algorithm."""
    raw: dict[str, dict[str, object]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        alg, dot, name = key.partition(".")
        if not sep or not dot or not alg or not name:
            raise ParamError(f"module parameter {item!r}: write <algorithm>.<parameter>=<value>, "
                             "e.g. reno_beta.beta=0.8")
        raw.setdefault(alg, {})[name] = value
    return {alg: check_params(alg, ps, field="module_params") for alg, ps in raw.items()}


def beta_effective(beta: float, n: int) -> float:
    """CUBIC+'s back-off factor (Stony Brook seed, section V)."""
    return 1 - (1 - beta) / n
