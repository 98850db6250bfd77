"""The web tier's server side: the deterministic site (`pages`), the lab PKI
(`pki`) and the Apache httpd configuration (`apache`).

Nothing here runs a network or needs root: the functions write files and
return argv lists; `tortoiselab.guest.webtier` runs them inside the lab.
"""
