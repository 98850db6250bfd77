"""The HTML report of an experiment: its context (runs, statistics, figures) and the template that renders it."""
