"""``tinyscope export RUN --to transformer-lens OUT``: a run's model as TransformerLens reads it
(the classic HookedTransformer state dict as safetensors + config.json; see
:mod:`tinyscope.interop.files`), and the two lines that load it. Writing needs only torch;
``--check`` loads OUT with TransformerLens (>= 4.3) and compares the logits."""
from __future__ import annotations

FORMATS = ("transformer-lens",)
CHECK_RTOL = 1e-5  # --check refuses logits further than this from ours, relative to the largest |logit|


def register(sub) -> None:
    p = sub.add_parser("export", help="write a run's model for another library (TransformerLens)")
    p.add_argument("run", help="run directory (or zoo:NAME)")
    p.add_argument("out", help="folder to write (new, empty, or an earlier export, which is replaced)")
    p.add_argument("--to", required=True, choices=FORMATS, help="the library: transformer-lens")
    p.add_argument("--checkpoint", default="best", help="best | last | a step number (default best)")
    p.add_argument("--check", action="store_true",
                   help="load OUT with TransformerLens and print how far its logits are from tinyscope's")
    p.set_defaults(func=cmd_export)


def _check_out(out) -> None:
    from tinyscope.errors import TinyscopeError
    from tinyscope.interop.files import META

    if out.exists() and not out.is_dir():
        raise TinyscopeError(f"{out} is a file; export writes a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / META).is_file():
        raise TinyscopeError(f"{out} is not empty and holds no earlier export; choose a new folder")


def cmd_export(args) -> int:
    from pathlib import Path

    import torch

    from tinyscope.commands.analyze import parse_checkpoint
    from tinyscope.errors import TinyscopeError
    from tinyscope.interop.files import save_transformer_lens
    from tinyscope.models.transformer import Transformer
    from tinyscope.runs.rundir import load_run

    which = parse_checkpoint(args.checkpoint)
    out = Path(args.out)
    _check_out(out)
    run = load_run(args.run, which)
    model = run.model
    if not isinstance(model, Transformer):
        raise TinyscopeError(f"{run.experiment.name}'s model is a {type(model).__name__}; export --to "
                             f"transformer-lens takes tinyscope's Transformer")
    source = {"run": str(args.run), "experiment": run.experiment.name, "preset": run.preset,
              "checkpoint": args.checkpoint, "step": run.step, "stage": run.stage}
    files = save_transformer_lens(model, out, source=source, model_name=run.experiment.name)
    step = f"step {run.step}" if run.step is not None else args.checkpoint
    print(f"wrote {out} ({run.experiment.name}, {step}; TransformerLens classic layout): "
          f"{', '.join(f.name for f in files)}")
    print(f"load it:  from tinyscope.interop import load_transformer_lens; bridge = load_transformer_lens({str(out)!r})")
    print(f"back:     from tinyscope.interop import from_transformer_lens; model = from_transformer_lens({str(out)!r})")
    if args.check:
        from tinyscope.interop.bridge import load_transformer_lens

        cfg = model.cfg
        tokens = torch.randint(0, cfg.vocab_size, (4, cfg.n_ctx), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            ours = model(tokens)  # (4, n_ctx, d_vocab_out)
            diff = (load_transformer_lens(out)(tokens) - ours).abs().max().item()
        scale = max(ours.abs().max().item(), 1.0)  # float32 rounds relative to the logits' size
        print(f"checked:  TransformerLens's logits are within {diff:.1e} of tinyscope's, {diff / scale:.1e} of the "
              f"largest |logit| ({scale:.3g}; max |difference| over 4 x {cfg.n_ctx} random tokens)")
        if diff > CHECK_RTOL * scale:
            raise RuntimeError(f"the exported model's logits differ from the run's by {diff:.1e}, "
                               f"{diff / scale:.1e} of the largest |logit| (> {CHECK_RTOL:.0e})")
    return 0
