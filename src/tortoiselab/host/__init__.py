"""The host side: starting the lab (backends), running experiments
(runner, slurm), storing runs (store) and the host ends of the lab tasks
(probe, loss response, page loads). Never imported by the guest."""
