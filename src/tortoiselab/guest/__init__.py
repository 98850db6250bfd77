"""What runs inside the lab, as root next to the emulated network (the UML
guest, or the host on the native backend): the entry point
(`python -m tortoiselab.guest REQUEST.json`), the Mininet builder, the
tasks, the web tier, and the one logged place commands run. Imports spec,
analysis and web; never host."""
