"""dumbbell for Mininet's CLI: N clients, cross-traffic hosts and the
server behind one shared bottleneck (with cdn_rtt_ms, a CDN host beside the
PoP), defined in src/tortoiselab/spec/topologies/dumbbell.py and built
through guest/topo.py as the lab builds it (docs/topologies.md):

    sudo .venv/bin/python /usr/bin/mn --custom topologies/dumbbell.py --topo dumbbell,2 --link tc
    sudo .venv/bin/python /usr/bin/mn --custom topologies/dumbbell.py --topo dumbbell,cdn_rtt_ms=20 --link tc
"""

from tortoiselab.guest.topo import mn_topos

topos = mn_topos("dumbbell")
