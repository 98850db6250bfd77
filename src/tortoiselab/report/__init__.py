"""The HTML report of an experiment (`tortoise report EXPERIMENT`; docs/analysis.md,
"The report"; its layer in docs/architecture.md):

- context: the results folder read through tortoiselab.host.store, and the
  tables the page shows (runs per sweep point, comparisons, fidelity,
  measured against the floor, metadata);
- plots: the figures drawn for what the runs carry;
- html: the page, rendered by Jinja2 from templates/report.html.j2, and
  write_report, the entry point.
"""

from tortoiselab.report.context import Context, ReportError, floor_table, format_floor_table, load_context
from tortoiselab.report.html import write_report

__all__ = ["Context", "ReportError", "floor_table", "format_floor_table", "load_context", "write_report"]
