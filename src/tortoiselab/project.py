"""Where the project's files are: the package and the repository around it
(an editable install). The one place that computes them."""

from __future__ import annotations

from pathlib import Path

PKG_DIR = Path(__file__).resolve().parent
REPO_DIR = PKG_DIR.parent.parent
