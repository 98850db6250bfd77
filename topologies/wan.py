"""wan for Mininet's CLI: client - s1 - WAN - s2 - server, the lab's
default path, defined in src/tortoiselab/spec/topologies/wan.py and built
through guest/topo.py as the lab builds it (docs/topologies.md):

    sudo .venv/bin/python /usr/bin/mn --custom topologies/wan.py --topo wan,200,10 --link tc
"""

from tortoiselab.guest.topo import mn_topos

topos = mn_topos("wan")
