"""cellular for Mininet's CLI: a last mile with a deep buffer, defined in
src/tortoiselab/spec/topologies/cellular.py and built through
guest/topo.py as the lab builds it (docs/topologies.md). mn shapes it at a
fixed rate: only the lab replays the capacity trace (docs/traces.md).

    sudo .venv/bin/python /usr/bin/mn --custom topologies/cellular.py --topo cellular --link tc
"""

from tortoiselab.guest.topo import mn_topos

topos = mn_topos("cellular")
