"""pop for Mininet's CLI: client - access - edge PoP - backhaul - origin,
defined in src/tortoiselab/spec/topologies/pop.py and built through
guest/topo.py as the lab builds it (docs/topologies.md):

    sudo .venv/bin/python /usr/bin/mn --custom topologies/pop.py --topo pop,rtt_ms=20,backhaul_rtt_ms=150 --link tc
"""

from tortoiselab.guest.topo import mn_topos

topos = mn_topos("pop")
