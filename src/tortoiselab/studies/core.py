"""Transitional: the studies now live in the package's modules (see
tortoiselab/studies/__init__.py); this name goes once its importers use
`from tortoiselab import studies`."""

from tortoiselab.project import REPO_DIR as REPO  # noqa: F401
from tortoiselab.studies import *  # noqa: F401,F403
from tortoiselab.studies import study_folder as results_folder  # noqa: F401
