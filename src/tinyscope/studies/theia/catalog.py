"""The experiments of this study as `tinyscope list` prints them, read without importing them
(generated from the registry by `python scripts/write_catalogs.py`; a test keeps it equal)."""
EXPERIMENTS = (
    ('theia-chain', ('smoke', 'cpu', 'paper'),
     'mod-3 composition chain: step model + TransitionNet, 3 phases (Li 2026 Sec. 4.4)'),
    ('theia-kleene', ('smoke', 'cpu', 'paper'),
     'THEIA engines learn complete Kleene K3 over 4 domains (Li 2026)'),
)
