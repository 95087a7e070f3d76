"""Training movies: one frame per checkpoint, each frame from its own checkpoint, fixed axes, the
paper's panel sets (Sec. 6), streamed GIF and MP4 (imageio-ffmpeg's own ffmpeg)."""
import imageio_ffmpeg
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from PIL import Image

from tinyscope.errors import TinyscopeError
from tinyscope.interp.plotting import MASKED_COLOR
from tinyscope.interp.video_writers import GifStream, Mp4Stream, make_palette
from tinyscope.runs.rundir import build, load_run, run_experiment
from tinyscope.studies.minimal import movie_frames as mf
from tinyscope.studies.minimal import movies as mv
from tinyscope.studies.minimal.geometry import all_points, landscape
from tinyscope.studies.minimal.movie_data import collect_snapshots, scene_limits, scene_planes
from tinyscope.studies.minimal.task import VOCAB
from tinyscope.train import checkpoint as ckpt

QUICK = ["train.steps=150", "train.checkpoint_every=50", "train.eval_every=50", "task.n_sequences=100",
         "task.n_eval_sequences=20", "eval.n_generated=4", "eval.n_val_windows=64"]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("movies") / "run"
    run_experiment("plus-last-even", "smoke", overrides=QUICK, out=out, progress=False)
    return load_run(out)


@pytest.fixture(scope="module")
def scene(short_run):
    snaps = collect_snapshots(short_run, short_run.checkpoint_steps(), VOCAB, sequence=[4, 1, 11, 4, 6, 9, 5, 11])
    planes = scene_planes(snaps[-1].geom, snaps[-1].attn)
    return snaps, planes, scene_limits(snaps, planes)


def test_each_snapshot_equals_its_own_checkpoint_loaded_into_a_fresh_model(short_run, scene):
    snaps, _, _ = scene
    assert [s.step for s in snaps] == [0, 50, 100, 150]
    for snap in snaps:
        _, fresh = build(short_run.experiment, short_run.cfg)
        ckpt.load_model(short_run.path / "checkpoints" / f"step_{snap.step:06d}.safetensors", fresh)
        alone = all_points(fresh.eval(), VOCAB)
        for name in ("tok", "pos", "emb", "q", "k", "v", "W_Q", "W_K", "W_V"):
            np.testing.assert_array_equal(getattr(snap.geom, name), getattr(alone, name), err_msg=f"{snap.step} {name}")
        np.testing.assert_allclose(snap.attn, alone.pooled_attention(), rtol=1e-6, atol=1e-7)
    assert not np.allclose(snaps[0].geom.pos, snaps[-1].geom.pos)  # training moved them: the check can fail


def test_axes_are_fixed_and_hold_every_frame(scene):
    snaps, planes, lim = scene
    for s in snaps:
        for key, pts in (("emb", planes["emb"].project(s.geom.emb)), ("q", planes["q"].project(s.geom.q)),
                         ("pos", planes["pos"].project(s.geom.pos)), ("tok", planes["tok"].project(s.geom.tok)),
                         ("attn", planes["attn"].project(s.attn)), ("land_emb", planes["emb"].project(s.geom.emb))):
            (x0, x1), (y0, y1) = lim[key]
            p = pts.reshape(-1, 2)
            assert (p[:, 0] >= x0).all() and (p[:, 0] <= x1).all() and (p[:, 1] >= y0).all() and (p[:, 1] <= y1).all()
    assert lim["score"] == max(np.nanmax(np.abs(s.geom.masked_scaled_scores())) for s in snaps)


def _titles(movie) -> list[str]:
    return [ax.get_title() for ax in movie.fig.axes if ax.get_title()]


def test_panel_sets_are_the_papers(scene):
    snaps, planes, lim = scene
    g = snaps[0].geom
    assert _titles(mf.EmbeddingsMovie(g, planes, lim, 40)) == [
        "(a) token embeddings x", "(b) position embeddings p", "(c) token + position e = x + p"]
    assert [t.split(" ", 1)[0] for t in _titles(mf.QKVMovie(g, planes, lim, 40))] == [
        "(a)", "(b)", "(c)", "(d)", "(e)", "(f)", "(g)", "(h)"]
    heat = mf.OutputHeatmapsMovie(g, planes, lim, 40, 12)
    assert _titles(heat) == [f"P(next = {t})" for t in VOCAB]
    assert len(_titles(mf.QKMovie(g, planes, lim, 40))) == 1
    assert len(_titles(mf.QKScoresMovie(g, planes, lim, 40))) == 2
    assert _titles(mf.QKVSimpleMovie(g, planes, lim, 40)) == ["embeddings e", "q = W_Q e", "k = W_K e", "v = W_V e"]


def test_score_movie_shows_the_full_matrix_with_the_causal_mask(short_run, scene):
    snaps, planes, lim = scene
    movie = mf.QKScoresMovie(snaps[0].geom, planes, lim, 60)
    frame = movie.frame(snaps[-1]).astype(int)  # (H, W, 3)
    ax = movie.right
    n = snaps[-1].geom.V * snaps[-1].geom.T
    assert ax.get_xlim() == (-0.5, n - 0.5)  # all 96 keys and 96 queries
    grey = np.array(to_rgb(MASKED_COLOR)) * 255
    T, H = snaps[-1].geom.T, frame.shape[0]
    for q, k in [(0, 1), (3, 12), (11 * T + 2, 5 * T + 6), (11 * T + 7, 4 * T + 3), (5, 5 * T), (2 * T, 9 * T)]:
        x, y = ax.transData.transform((k + 0.25, q + 0.25))  # inside the cell, off its grid lines
        pixel = frame[int(H - y), int(x)]
        masked = k % T > q % T
        assert np.abs(pixel - grey).max() <= 2 if masked else np.abs(pixel - grey).max() > 10, (q, k)


def test_movies_of_a_short_run_have_one_frame_per_checkpoint_in_gif_and_mp4(short_run, tmp_path):
    steps = short_run.checkpoint_steps()
    written = mv.render_movies(short_run, out_dir=tmp_path, dpi=30, grid=24, progress=False)
    assert list(written) == mv.MOVIE_NAMES
    for name, files in written.items():
        assert [f.suffix for f in files] == [".gif", ".mp4"]
        with Image.open(files[0]) as gif:
            assert gif.n_frames == len(steps), name
            gif.seek(0)
            first = np.asarray(gif.convert("RGB"), dtype=int)
            gif.seek(len(steps) - 1)
            last = np.asarray(gif.convert("RGB"), dtype=int)
        assert np.abs(first - last).sum() > 0, f"{name}: nothing moved"
        assert imageio_ffmpeg.count_frames_and_secs(str(files[1]))[0] == len(steps), name
    assert not list(tmp_path.glob(".*tmp*"))


def test_variants_are_chosen_by_name_with_or_without_their_number(short_run, tmp_path):
    assert mv.resolve_movie_names(["qkv_simple", "01_embeddings"]) == ["01_embeddings", "03_qkv_simple"]
    written = mv.render_movies(short_run, out_dir=tmp_path, only=["output_argmax_embeddings",
                                                                  "qk_space_sequence_attention"],
                               dpi=30, grid=16, mp4=False, progress=False)
    assert list(written) == ["02_output_argmax_embeddings", "05_qk_space_sequence_attention"]
    with pytest.raises(TinyscopeError, match="no movie named"):
        mv.resolve_movie_names(["06_nothing"])


def test_movie_cli_writes_the_chosen_movie_and_puts_it_in_the_report(short_run, capsys):
    import io

    from tinyscope.cli import main
    from tinyscope.report.run_report import data_uri

    figures = short_run.path / "figures"  # the views as `tinyscope viz` left them: reused, not drawn again
    figures.mkdir(exist_ok=True)
    buf = io.BytesIO()
    Image.new("RGB", (3, 2), (1, 2, 3)).save(buf, format="PNG")
    views = short_run.experiment.views(short_run)
    for v in views:
        (figures / f"{v.name}.png").write_bytes(buf.getvalue())
    assert main(["movie", str(short_run.path), "--only", "04_qk_space", "--dpi", "30", "--no-progress"]) == 0
    out = capsys.readouterr().out.split()
    movies = short_run.path / "movies"
    assert out == [str(movies / "04_qk_space.gif"), str(movies / "04_qk_space.mp4")]
    with Image.open(movies / "04_qk_space.gif") as gif:
        assert gif.n_frames == len(short_run.checkpoint_steps())
    page = (short_run.path / "report.html").read_text()
    assert 'id="04_qk_space"' in page and "data:video/mp4;base64," in page
    assert 'id="01_embeddings"' not in page  # only movies that exist are shown
    assert page.count(data_uri(buf.getvalue(), "image/png")) == len(views)


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


def test_mp4_stream_writes_every_frame_with_imageio_ffmpeg(tmp_path):
    frames = [np.full((31, 45, 3), 40 * i, dtype=np.uint8) for i in range(5)]  # odd sides are padded
    with Mp4Stream(tmp_path / "m.mp4", fps=5) as m:
        for f in frames:
            m.write(f)
    assert imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "m.mp4"))[0] == 5
    reader = imageio_ffmpeg.read_frames(str(tmp_path / "m.mp4"))
    meta = next(reader)
    assert meta["size"] == (46, 32)
    means = [np.frombuffer(f, np.uint8).reshape(32, 46, 3)[:31, :45].mean() for f in reader]
    np.testing.assert_allclose(means, [40 * i for i in range(5)], atol=3)
    with pytest.raises(ValueError, match="frame 1 is"):
        with Mp4Stream(tmp_path / "bad.mp4") as m:
            m.write(frames[0])
            m.write(frames[0][:10])
    assert not (tmp_path / "bad.mp4").exists() and not list(tmp_path.glob(".*tmp*"))


def test_output_heatmaps_show_the_model_probabilities(scene, short_run):
    snaps, planes, lim = scene
    movie = mf.OutputHeatmapsMovie(snaps[-1].geom, planes, lim, 40, 12)
    land = landscape(short_run.load_step(snaps[-1].step), *lim["land_emb"], n=20, plane=planes["emb"])
    frame = movie.frame(snaps[-1], land).astype(int)
    H = frame.shape[0]
    n = len(land.xs)
    (x0, x1), (y0, y1) = lim["land_emb"]
    centres = (np.arange(n) + 0.5) / n
    for u in (0, 4, 11):
        ax = movie.axes[u]
        got, want = [], []
        for i in range(n):
            for j in range(n):
                x, y = ax.transData.transform((x0 + centres[j] * (x1 - x0), y0 + centres[i] * (y1 - y0)))
                got.append(frame[int(H - y), int(x)])
                want.append(movie.lut[int(np.rint(land.probs[i, j, u] * 255))])
        close = np.abs(np.array(got) - np.array(want, dtype=int)).max(-1) <= 1
        assert close.mean() > 0.9, (u, close.mean())  # the rest lie under dots and names
