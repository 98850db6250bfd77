"""One-at-a-time (OAT) sensitivity of a market's assumptions
(docs/population.md, "Sensitivity"): every number of a market that
topologies/populations.yaml marks as an assumption (a distribution's
`assumed` numbers, or all of them when it has no source; a share with an
assumption and no source) moved to a low and a high value, the others at
their base, as `population.vary` settings (spec/population.vary_market).

The moves, one rule per kind of number, wide enough to matter and never
outside what the file's checks accept:

- a spread (`spread` = p90 / median, or `p90` over the median): divided
  and multiplied by SPREAD_FACTOR (1.5), at least MIN_SPREAD;
- `zero_share` (the loss-free users): the share of users with loss halved
  and doubled (at most all of them);
- a share's `value` (warm loads, bursty loss): halved and doubled (at
  most 1); a share of 0 is left out (a market whose users have no bursty
  loss has no burst length to draw);
- a centre or a fixed value (`median`, `mean`, `fixed`): halved and
  doubled (FACTOR).

Pure: the settings come from the market's numbers alone; the runs and the
verdict per setting are studies/population_sensitivity's."""

from __future__ import annotations

from dataclasses import dataclass

from tortoiselab.spec.population import Dist, Market, PopulationError, Share, vary_market, vary_name

FACTOR = 2.0  # a centre or fixed value: / and x
SPREAD_FACTOR = 1.5  # a spread (p90 / median): / and x
MIN_SPREAD = 1.1  # the narrowest spread a low setting takes (1 would be every user alike)
LEVELS = ("low", "high")


@dataclass(frozen=True)
class Setting:
    """One OAT setting: `key` ("param.field") at `value` (its `level`, low
    or high) in place of `base`."""

    market: str
    key: str
    level: str
    base: float
    value: float

    def vary(self) -> dict[str, float]:
        return {self.key: self.value}

    @property
    def name(self) -> str:
        """As runs record it (spec/population.vary_name)."""
        return vary_name(self.vary())


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def moves(field: str, base: float, median: float | None = None) -> tuple[float, float]:
    """(low, high) of one assumed number by its kind (the module's rules);
    median: a p90's median, to move the p90 / median ratio."""
    if field == "zero_share":
        lossy = 1 - base
        return _sig(max(0.0, 1 - min(1.0, FACTOR * lossy))), _sig(1 - lossy / FACTOR)
    if field == "spread":
        return _sig(max(MIN_SPREAD, base / SPREAD_FACTOR)), _sig(base * SPREAD_FACTOR)
    if field == "p90" and median:
        ratio = base / median
        return _sig(median * max(MIN_SPREAD, ratio / SPREAD_FACTOR)), _sig(median * ratio * SPREAD_FACTOR)
    if field == "value":
        return _sig(base / FACTOR), _sig(min(1.0, base * FACTOR))
    return _sig(base / FACTOR), _sig(base * FACTOR)


def assumed_numbers(m: Market) -> list[tuple[str, float, float | None]]:
    """(key "param.field", base value, the median a p90 is over) of every
    number the market marks as an assumption, in the file's order of
    parameters; shares of 0 left out."""
    out: list[tuple[str, float, float | None]] = []
    for param in Market.model_fields:
        v = getattr(m, param)
        if isinstance(v, Dist):
            out += [(f"{param}.{f}", float(getattr(v, f)), v.median) for f in v.assumed_fields()]
        elif isinstance(v, Share) and v.assumption is not None and v.source is None and v.value > 0:
            out.append((f"{param}.value", v.value, None))
    return out


def oat_settings(name: str, m: Market) -> tuple[list[Setting], list[str]]:
    """The market's OAT settings (low and high of each assumed number; a
    move that lands on the base value left out), and the moves left out
    because the market would not be valid with them (each with why)."""
    settings, skipped = [], []
    for key, base, median in assumed_numbers(m):
        for level, value in zip(LEVELS, moves(key.split(".", 1)[1], base, median)):
            if value == base:
                continue
            try:
                vary_market(m, {key: value})
            except PopulationError as exc:
                skipped.append(f"{name} {key}={value:g} ({level}): {exc}")
                continue
            settings.append(Setting(name, key, level, base, value))
    return settings, skipped


def sweep_values(markets: dict[str, Market], pages: dict[str, str]) -> list[list]:
    """The linked axis population.market+client.page+population.vary of a
    sensitivity grid: per market (in `pages`, the page its claims load) the
    base ({}) and then every OAT setting."""
    out: list[list] = []
    for name, page in pages.items():
        out.append([name, page, {}])
        out += [[name, page, s.vary()] for s in oat_settings(name, markets[name])[0]]
    return out
