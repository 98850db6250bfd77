"""Each study's claims, one module per study: the seed's words, the
measurement functions that compute our number from the runs, and the
judge of each (the studies are listed in labs/README.md; adding a claim:
docs/architecture.md, "Where to add things")."""
