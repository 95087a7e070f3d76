"""Training movies: one frame per checkpoint, fixed axes, streamed GIF (and MP4 through ffmpeg)."""
import stat

import numpy as np
import pytest
from PIL import Image

from tinyscope.errors import TinyscopeError
from tinyscope.interp.video_writers import GifStream, Mp4Stream, make_palette
from tinyscope.runs.rundir import load_run, run_experiment
from tinyscope.studies.minimal import movies as mv

QUICK = ["train.steps=150", "train.checkpoint_every=50", "train.eval_every=50", "task.n_sequences=100",
         "task.n_eval_sequences=20", "eval.n_generated=4", "eval.n_val_windows=64"]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("movies") / "run"
    run_experiment("plus-last-even", "smoke", overrides=QUICK, out=out, progress=False)
    return load_run(out)


def test_movie_of_a_short_run_has_one_frame_per_checkpoint(short_run, tmp_path):
    steps = short_run.checkpoint_steps()
    assert steps == [0, 50, 100, 150]
    written = mv.render_movies(short_run, out_dir=tmp_path, dpi=30, grid=24, mp4=False, progress=False)
    assert sorted(written) == mv.MOVIE_NAMES
    for name, files in written.items():
        with Image.open(files[0]) as gif:
            assert gif.n_frames == len(steps), name
            gif.seek(0)
            first = np.asarray(gif.convert("RGB"), dtype=int)
            gif.seek(len(steps) - 1)
            last = np.asarray(gif.convert("RGB"), dtype=int)
        assert np.abs(first - last).sum() > 0, f"{name}: nothing moved"


def test_axes_are_fixed_and_hold_every_frame(short_run):
    labels = [str(i) for i in range(11)] + ["+"]
    snaps = []
    for step in short_run.checkpoint_steps():
        model = short_run.load_step(step)
        snaps.append(mv.Snapshot(step, mv.all_points(model, labels), None, ""))
    planes = mv._planes(snaps[-1].geom)
    lim = mv._limits(snaps, planes)
    for s in snaps:
        for key, pts in (("emb", planes["emb"].project(s.geom.emb)), ("q", planes["q"].project(s.geom.q)),
                         ("tok", planes["tok"].project(s.geom.tok))):
            (x0, x1), (y0, y1) = lim[key]
            p = pts.reshape(-1, 2)
            assert (p[:, 0] >= x0).all() and (p[:, 0] <= x1).all() and (p[:, 1] >= y0).all() and (p[:, 1] <= y1).all()


def test_movie_cli_writes_the_chosen_movie(short_run, tmp_path, capsys):
    from tinyscope.cli import main

    assert main(["movie", str(short_run.path), "--only", "04_qk_space", "--dpi", "30", "--no-mp4", "--no-progress",
                 "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "04_qk_space.gif")
    with Image.open(tmp_path / "04_qk_space.gif") as gif:
        assert gif.n_frames == len(short_run.checkpoint_steps())


def test_unknown_movie_is_a_clear_error(short_run, tmp_path):
    with pytest.raises(TinyscopeError, match="no movie named"):
        mv.render_movies(short_run, out_dir=tmp_path, only=["06_nothing"], progress=False)


def test_landscape_movie_refuses_a_two_layer_model(tmp_path):
    out = tmp_path / "deep"
    run_experiment("plus-last-even", "smoke", overrides=QUICK + ["train.steps=10", "model.n_heads=[1,1]",
                                                                   "model.d_mlp=[8,8]"], out=out, progress=False)
    with pytest.raises(TinyscopeError, match="one-layer model; this one has 2 layers"):
        mv.render_movies(load_run(out), out_dir=tmp_path, only=["02_output_landscape_embeddings"], progress=False)


def test_gif_stream_round_trips_frames_exactly(tmp_path):
    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, size=(6, 3))
    frames = [colours[rng.integers(0, 6, size=(20, 30))].astype(np.uint8) for _ in range(3)]  # (20, 30, 3)
    with GifStream(tmp_path / "x.gif", fps=10, palette=make_palette(*frames)) as g:
        for f in frames:
            g.write(f)
    with Image.open(tmp_path / "x.gif") as gif:
        assert gif.n_frames == 3 and gif.size == (30, 20)
        for i, f in enumerate(frames):
            gif.seek(i)
            np.testing.assert_array_equal(np.asarray(gif.convert("RGB")), f)
    with pytest.raises(ValueError, match="frame 1 is"):
        with GifStream(tmp_path / "y.gif") as g:
            g.write(frames[0])
            g.write(frames[0][:10])
    assert not (tmp_path / "y.gif").exists()  # a failed movie leaves no half-written file


def test_mp4_stream_pipes_every_frame_to_ffmpeg(tmp_path):
    fake = tmp_path / "ffmpeg"  # stands in for ffmpeg: counts the bytes it is sent
    fake.write_text('#!/bin/sh\nfor last; do :; done\nwc -c > "$last"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    frames = [np.full((6, 8, 3), i, dtype=np.uint8) for i in range(5)]
    with Mp4Stream(tmp_path / "m.mp4", fps=5, exe=str(fake)) as m:
        for f in frames:
            m.write(f)
    assert int((tmp_path / "m.mp4").read_text().split()[0]) == 5 * 6 * 8 * 3
