"""What a run is, as data: paths, experiments, region profiles, module
parameters, topologies and the typed requests the host sends the lab.
Pure: no processes, no network; imported by host, guest and analysis alike."""
