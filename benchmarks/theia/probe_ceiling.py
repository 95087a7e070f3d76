"""The Has-Unknown Bayes rule on the probes' own test part (THEIA, seed003-details Sec. 1.7).

A probe cannot beat the Bayes rule in expectation; on a finite test part it can beat the exact
ceiling by that part's sampling scatter. This prints, for probe sets of 6,000 records (the size
behind the guide's old 80.7 / 91.9 / 90.3 / 100.0%) and 50,000 (the paper's), the Bayes rule's
accuracy on the 20% test part beside the exact ceiling, per boundary. Target: at 50,000 records
every boundary within 0.3 point of its ceiling.

    OMP_NUM_THREADS=1 python benchmarks/theia/probe_ceiling.py
"""
from tinyscope.studies.theia.analysis import BOUNDARIES, has_unknown_sample_ceiling, probe_records
from tinyscope.studies.theia.task import has_unknown_ceiling


def main() -> None:
    for n in (6_000, 50_000):
        x = probe_records(n, seed=999)
        cells = [f"{b} {100 * has_unknown_sample_ceiling(x, b):.2f} (exact {100 * has_unknown_ceiling(b):.2f})"
                 for b in BOUNDARIES]
        print(f"{n:>6} records, {n - int(0.8 * n)} test: " + "; ".join(cells))


if __name__ == "__main__":
    main()
