"""Pure analysis of what runs produced: captures (flights), tool output
(parsers), statistics, the napkin model, fidelity checks, congestion
control fits and figures. No processes; tested on canned data."""
