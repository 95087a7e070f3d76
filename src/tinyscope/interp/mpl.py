"""matplotlib with the Agg backend, set here and nowhere else.

Code that draws with pyplot imports it from here (``from tinyscope.interp.mpl import plt``), so
the backend is chosen once, before pyplot is first imported, and figures never need a display.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["plt"]
