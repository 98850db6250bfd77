"""The stock TCP congestion control algorithms, by the name they register:
a module of the standard library alone, so that the Makefile's steps that
run before the venv exists (`python -m tortoiselab.host.hostcheck`, the
kernel build's progress) can read it with Debian's python3
(docs/make-targets.md)."""

# The stock algorithms of Linux 6.12 (net/ipv4/Kconfig, TCP_CONG_*), by the
# name they register; `reno` is always built in.
STOCK_ALGORITHMS = (
    "reno", "cubic", "bic", "westwood", "htcp", "highspeed", "hybla",
    "vegas", "nv", "scalable", "lp", "veno", "yeah", "illinois", "dctcp",
    "cdg", "bbr",
)
