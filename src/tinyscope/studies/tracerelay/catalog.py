"""The experiments of this study as `tinyscope list` prints them, read without importing them
(generated from the registry by `python scripts/write_catalogs.py`; a test keeps it equal)."""
EXPERIMENTS = (
    ('tracerelay-dyck', ('smoke', 'cpu', 'paper'),
     'TraceRelay on bounded Dyck-(8, 10) closing-type prediction'),
    ('tracerelay-equal-repeats', ('smoke', 'cpu', 'paper'),
     'TraceRelay on Equal Repeats, with phase inheritance'),
    ('tracerelay-equal-repeats-no-inheritance', ('smoke', 'cpu', 'paper'),
     'TraceRelay on Equal Repeats, no-inheritance ablation (theta = wrap(u))'),
    ('tracerelay-most-freq', ('smoke', 'cpu', 'paper'),
     'TraceRelay on Most-Freq (V=5) with greedy free generation'),
)
