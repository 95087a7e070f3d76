"""The catalogue of views of a run, in the order of the paper's walkthrough (Fig. 2-15).

A :class:`WalkthroughView` names a figure (its file stem says what it shows), the paper figure it
reproduces, when it applies to a run, and how to draw it from a :class:`ViewContext` (a loaded
run plus the shared, lazily computed geometry, landscape and sequence trace). ``tinyscope viz``
and the run report reach them through :func:`run_views` (the experiment's ``views``).
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterator

import numpy as np

from tinyscope.errors import TinyscopeError
from tinyscope.report.learning_curve import learning_curve_figure
from tinyscope.runs.experiment import View, ViewOptions
from tinyscope.studies.minimal import geometry_views as gv
from tinyscope.studies.minimal import sequence_views as sv
from tinyscope.studies.minimal import supplementary_views as xv
from tinyscope.studies.minimal import walkthrough_views as wv
from tinyscope.studies.minimal.architecture import architecture_figure
from tinyscope.studies.minimal.geometry import (
    Geometry,
    Landscape,
    all_points,
    has_geometry,
    model_dims,
    n_layers,
    resid_mid_name,
    token_labels,
)
from tinyscope.studies.minimal.walkthrough import DEFAULT_SEQUENCE, Trace, parse_sequence, trace_sequence

log = logging.getLogger(__name__)


def rule_targets_of(task) -> Callable | None:
    """The task's rule (``rule_targets(seq)``) when it has one, for the coloured sequence views."""
    fn = getattr(task, "rule_targets", None)
    if callable(fn):
        return fn
    from tinyscope.studies.minimal.task import PlusLastEven, rule_targets

    return rule_targets if isinstance(task, PlusLastEven) else None


@dataclass
class ViewContext:
    """A loaded run (``tinyscope.runs.rundir.Run``) and the view options.

    sequence: the walkthrough sequence (token names separated by spaces; None = the paper's
    ``4 1 + 4 6 9 5 +`` when the vocabulary has those tokens, else the start of a held-out one);
    focus: the query token of Fig. 7-8 (None = ``+`` or the last token); head: the head drawn;
    grid: landscape resolution per side; n_sequences / seq_len: rows and length of Fig. 2 and 4.
    """

    run: object
    sequence: str | None = None
    focus: str | None = None
    focus_position: int | None = None
    head: int = 0
    grid: int = 160
    n_sequences: int = 4
    seq_len: int = 32
    seed: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def model(self):
        return self.run.model

    @cached_property
    def labels(self) -> list[str]:
        return token_labels(self.run.task, model_dims(self.model)[0]) if has_geometry(self.model) else \
            list(getattr(self.run.task, "vocab", []))

    @cached_property
    def geometry(self) -> Geometry:
        return all_points(self.model, self.labels, head=self.head)

    @cached_property
    def landscape(self) -> Landscape:
        return gv.landscape_for(self.model, self.geometry, n=self.grid)

    @cached_property
    def trace(self) -> Trace:
        return trace_sequence(self.model, self.sequence_ids(), self.labels, head=self.head)

    def sequence_ids(self) -> list[int]:
        _, T = model_dims(self.model)
        if self.sequence is not None:
            return parse_sequence(self.sequence, self.labels)
        try:
            return parse_sequence(DEFAULT_SEQUENCE, self.labels)[:T]
        except TinyscopeError:
            pool = getattr(self.run.task, "heldout", None) or getattr(self.run.task, "corpus", None)
            if pool:
                return [int(t) for t in pool[0][:T]]
            return [i % len(self.labels) for i in range(T)]

    @property
    def rule(self):
        return rule_targets_of(self.run.task)

    @property
    def step(self) -> int | None:
        return getattr(self.run, "step", None)


@dataclass(frozen=True)
class WalkthroughView:
    """A catalogue entry: the figure's file stem, the paper figure, a caption, how to draw it from
    a :class:`ViewContext`, when it applies to a run, and (optionally) the same content as text."""

    name: str
    figure: str
    caption: str
    render: Callable[[ViewContext], object]
    applies: Callable[[ViewContext], bool]
    table: Callable[[ViewContext], str] | None = None


MAX_POINTS = 2048  # V * T beyond which the all-points views would be unreadable (and slow)


def _geometric(ctx: ViewContext) -> bool:
    """The model has the hooks and few enough (token, position) points to draw them all."""
    if not has_geometry(ctx.model):
        return False
    V, T = model_dims(ctx.model)
    return V * T <= MAX_POINTS


def _landscape_ok(ctx: ViewContext) -> bool:
    """The output landscape reads z = e + Attn(e) as the input of the output network: one layer only."""
    return _geometric(ctx) and n_layers(ctx.model) == 1 and resid_mid_name(ctx.model) in ctx.model.hook_dict


def _training_data(ctx: ViewContext):
    rng = np.random.default_rng(ctx.seed)
    corpus = ctx.run.task.corpus
    rows = rng.choice(len(corpus), size=min(ctx.n_sequences, len(corpus)), replace=False)
    seqs = [np.asarray(corpus[r][:ctx.seq_len]) for r in rows]
    return sv.sequences_figure(seqs, ctx.labels, ctx.rule, "Training sequences (Fig. 2)",
                               [f"corpus[{r}]" for r in rows])


def _initial_model(ctx: ViewContext):
    """The model at step 0: the saved step-0 checkpoint, else a fresh build from the run's seed."""
    from tinyscope.runs.rundir import build
    from tinyscope.train import checkpoint as ckpt

    path = ctx.run.path / "checkpoints" / "step_000000.safetensors"
    if path.exists():
        model = copy.deepcopy(ctx.model)
        ckpt.load_model(path, model)
    else:
        _, model = build(ctx.run.experiment, ctx.run.cfg)
    return model.eval()


def _generations(ctx: ViewContext):
    _, T = model_dims(ctx.model)
    V = len(ctx.labels)
    before = sv.generate(_initial_model(ctx), ctx.n_sequences, ctx.seq_len, T, V, seed=ctx.seed)
    after = sv.generate(ctx.model, ctx.n_sequences, ctx.seq_len, T, V, seed=ctx.seed)
    return sv.generations_figure(before, after, ctx.labels, ctx.rule, 0, ctx.step if ctx.step is not None else -1)


def _demo_traces(ctx: ViewContext) -> list[Trace]:
    """The walkthrough sequence and two held-out ones, traced (the supplementary figures' three)."""
    if "demo_traces" not in ctx.extra:
        seqs = xv.demo_sequences(ctx.sequence_ids(), ctx.run.task, ctx.model)
        ctx.extra["demo_traces"] = [trace_sequence(ctx.model, s, ctx.labels, head=ctx.head) for s in seqs]
    return ctx.extra["demo_traces"]


def _readouts(ctx: ViewContext):
    return xv.attention_readout_figure([xv.readout(ctx.model, tr.tokens, head=ctx.head) for tr in _demo_traces(ctx)],
                                       ctx.labels)


def _overlay_panels(ctx: ViewContext, which: str):
    """Fig. 9's panels with all V*T embeddings e (a4/07) or values v (a4/12) overlaid."""
    pts = ctx.geometry.emb if which == "e" else ctx.geometry.v
    title = ("Output probabilities with all combined embeddings e overlaid (suppl. a4/07)" if which == "e" else
             "Output probabilities with all values v = W_V e overlaid (suppl. a4/12)")
    return gv.probability_panels_figure(ctx.landscape, ctx.labels, title=title,
                                        clouds=ctx.landscape.plane.project(pts))


def _values_in_residual(ctx: ViewContext) -> bool:
    return _landscape_ok(ctx) and ctx.geometry.v.shape[-1] == ctx.geometry.emb.shape[-1]


def _can_generate(ctx: ViewContext) -> bool:
    return ctx.rule is not None and _geometric(ctx)


VIEWS: list[WalkthroughView] = [
    WalkthroughView("01_architecture", "Figure 1", "The model's architecture drawn from its own shapes: each part's "
         "weights and parameter count, the residual connections beside.", lambda c: architecture_figure(c.model),
         lambda c: has_geometry(c.model) and hasattr(c.model, "blocks")),
    WalkthroughView("02_training_sequences", "Figure 2", "Sample training sequences; green: constrained and correct, grey: "
         "unconstrained.", _training_data, lambda c: c.rule is not None and hasattr(c.run.task, "corpus")),
    WalkthroughView("03_learning_curve", "Figure 3", "Loss (left axis) and error metrics (right axis) over training steps.",
         lambda c: learning_curve_figure(c.run.metrics(), "Training dynamics (Fig. 3)"), lambda c: bool(c.run.metrics())),
    WalkthroughView("04_generations_before_after", "Figure 4", "Model generations at initialisation (top) and after "
         "training (bottom), coloured by the rule.", _generations, _can_generate),
    WalkthroughView("05_embeddings", "Figure 5", "Token and position embeddings as heatmaps and scatter plots; every "
         "token + position sum labelled (token, position).", lambda c: gv.embeddings_figure(c.geometry), _geometric),
    WalkthroughView("06_qkv_projections", "Figure 6", "All token + position points through W_Q, W_K and W_V, with each "
         "matrix inset.", lambda c: gv.qkv_figure(c.geometry), _geometric),
    WalkthroughView("07_qk_space_focused_query", "Figure 7", "Joint query/key space; one query's dot product over the plane "
         "with causally masked keys greyed.",
         lambda c: gv.qk_space_figure(c.geometry, c.focus, c.focus_position), _geometric),
    WalkthroughView("08_query_token_scores", "Figure 8", "Raw q.k blocks of the focus query token against every key token, "
         "T x T each.", lambda c: gv.query_token_scores_figure(c.geometry, c.focus), _geometric),
    WalkthroughView("08s_all_scores", "Supplementary a4/11", "The full (V T) x (V T) matrix of raw q.k grouped by token.",
         lambda c: gv.full_scores_figure(c.geometry), _geometric),
    WalkthroughView("08x_qkv_overview", "Supplementary 07", "3 x 3 overview: token, position and combined "
         "embeddings; q, k, v spaces; q and k together; each point's attention output over all earlier keys.",
         lambda c: xv.qkv_overview_figure(c.geometry), _geometric),
    WalkthroughView("08y_qkv_extended", "Extended 08", "Each dimension of q, k and v as a tokens x positions heatmap, "
         "with W_Q, W_K, W_V.", lambda c: xv.qkv_extended_figure(c.geometry), _geometric),
    WalkthroughView("09_output_probabilities", "Figure 9", "P(next = token) of the output network over the plane, one "
         "panel per token.", lambda c: gv.probability_panels_figure(c.landscape, c.labels), _landscape_ok),
    WalkthroughView("09e_output_probabilities_embeddings", "Supplementary a4/07", "Fig. 9's per-token panels with "
         "all V*T combined embeddings e overlaid, in token colours (tokens named in the first panel).", lambda c: _overlay_panels(c, "e"),
         _landscape_ok),
    WalkthroughView("09v_output_probabilities_values", "Supplementary a4/12", "Fig. 9's per-token panels with all "
         "V*T values v = W_V e overlaid, in token colours (tokens named in the first panel).", lambda c: _overlay_panels(c, "v"),
         _values_in_residual),
    WalkthroughView("10_output_entropy_argmax", "Figure 10", "Entropy and argmax maps of the output network, with the "
         "embeddings and the values overlaid.", lambda c: gv.output_summary_figure(c.landscape, c.geometry),
         _landscape_ok),
    WalkthroughView("11_walk_embeddings", "Figure 11", "The walkthrough sequence's embeddings against all points.",
         lambda c: wv.walk_embeddings_figure(c.trace, c.geometry), _geometric),
    WalkthroughView("12_walk_queries_keys", "Figure 12", "The sequence's queries and keys against all queries and keys.",
         lambda c: wv.walk_qk_figure(c.trace, c.geometry), _geometric),
    WalkthroughView("13_walk_attention", "Figure 13", "Per-query dot products over the plane, masked q.k and the attention "
         "matrix.", lambda c: wv.walk_attention_figure(c.trace, c.geometry), _geometric),
    WalkthroughView("14_walk_values", "Figure 14", "Values and attention outputs of the sequence.",
         lambda c: wv.walk_values_figure(c.trace, c.geometry), _geometric),
    WalkthroughView("15_walk_prediction", "Figure 15", "Each embedding nudged by its attention output into its output "
         "region.", lambda c: wv.walk_prediction_figure(c.trace, c.landscape), _landscape_ok),
    WalkthroughView("16_next_token_probabilities", "Readout", "P(next token) at every position of the sequence "
         "(--sequence); argmax boxed, rule target dotted.", lambda c: xv.next_token_figure(c.trace, c.rule),
         _geometric, table=lambda c: xv.next_token_table(c.trace, c.rule)),
    WalkthroughView("17_attention_readout", "Supplementary 14", "For three sequences (the walkthrough's and two "
         "held-out): attention, LM-head input, logits and output probabilities.", _readouts, _geometric),
    WalkthroughView("18_value_arrows", "Supplementary 16", "For the same three sequences: values, attention outputs "
         "and the residual move e -> z, z green where the rule's prediction is right, red where wrong.",
         lambda c: xv.value_arrows_figure(_demo_traces(c), c.rule), _geometric),
]

VIEW_NAMES = [v.name for v in VIEWS]


def select_views(only: list[str] | None = None) -> list[WalkthroughView]:
    """The views named in ``only`` (full names or their part after the number), in paper order."""
    if not only:
        return list(VIEWS)
    chosen = []
    for want in only:
        hits = [v for v in VIEWS if want in (v.name, v.name.split("_", 1)[1])]
        if not hits:
            raise TinyscopeError(f"no view named {want!r}; choose from {', '.join(VIEW_NAMES)}")
        chosen += [h for h in hits if h not in chosen]
    return [v for v in VIEWS if v in chosen]


def render_views(ctx: ViewContext, only: list[str] | None = None) -> Iterator[tuple[WalkthroughView, object]]:
    """Yield (view, Figure) for every selected view that applies to the run, in paper order."""
    for view in select_views(only):
        if view.applies(ctx):
            yield view, view.render(ctx)


def run_views(run, options: ViewOptions = ViewOptions()) -> list[View]:
    """The catalogue as the run's :class:`~tinyscope.runs.experiment.View` s: every view that
    applies, in paper order, drawn on demand from one shared context (geometry, landscape and
    trace are computed once, at the first view that needs them)."""
    ctx = ViewContext(run, sequence=options.sequence, focus=options.focus, focus_position=options.focus_position,
                      head=options.head)
    out = []
    for view in VIEWS:
        try:
            applies = view.applies(ctx)
        except TinyscopeError:  # the user's view options are wrong (a head that does not exist): one line
            raise
        except Exception as exc:  # noqa: BLE001 - a view that cannot tell is left out, and logged
            log.warning("cannot tell whether %s applies: %s", view.name, exc)
            applies = False
        if applies:
            table = (lambda v=view: v.table(ctx)) if view.table is not None else None
            out.append(View(view.name, view.figure, view.caption, lambda v=view: v.render(ctx), table=table))
    return out
