"""Regenerate every study's ``catalog.py`` (what `tinyscope list` prints without importing the
experiments) from the registry; run it after adding, renaming or describing an experiment.

    python scripts/write_catalogs.py
"""
from tinyscope.runs.registry import write_catalogs

if __name__ == "__main__":
    for path in write_catalogs():
        print(f"wrote {path}")
