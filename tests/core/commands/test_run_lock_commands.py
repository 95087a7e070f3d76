"""`viz`, `analyze` and `movie` write into a run directory, so they take its lock: while another
process holds it (a training run, say), each stops with one line naming the holder, exit 2, and
writes nothing; `viz --list` only reads and still answers."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tinyscope.cli import main
from tinyscope.runs.rundir import run_experiment

HOLD = """
import sys, time
from tinyscope.runs.lock import run_lock
with run_lock(sys.argv[1], command="tinyscope run (test holder)"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture(scope="module")
def held_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("locked") / "run"
    run_experiment("plus-last-even", "smoke", out=run, progress=False, report="none")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    yield run
    holder.kill()
    holder.wait()


@pytest.mark.parametrize("argv", [["viz"], ["analyze"], ["movie"]], ids=lambda a: a[0])
def test_a_second_writer_is_refused_in_one_line(held_run, argv, capsys):
    before = sorted(p.name for p in held_run.iterdir())
    t0 = time.perf_counter()
    assert main([*argv, str(held_run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "test holder" in err[0], err
    assert time.perf_counter() - t0 < 30
    assert sorted(p.name for p in held_run.iterdir()) == before


def test_listing_views_only_reads(held_run, capsys):
    assert main(["viz", str(held_run), "--list"]) == 0
    assert "05_embeddings" in capsys.readouterr().out
