"""The circuit paper's training protocol as numbers, shared by the experiments and the claims:
its ten seeds, its epochs per task, and the ``cpu`` preset's epochs (Ito et al., "Optimisation")."""
from __future__ import annotations

PAPER_SEEDS = (8739, 7520, 1936, 7439, 6210, 5650, 5395, 3140, 1243, 5353)
PAPER_EPOCHS = {"boolean": 1000, "arithmetic": 50, "listops": 300}
CPU_EPOCHS = {"boolean": 300, "arithmetic": 6, "listops": 60}  # the cpu presets (they also stop early)
