"""BPE corpus preparation speed: learning the byte-level BPE and writing the token cache of
``ncffn-gpt2`` (:func:`tinyscope.studies.ncffn.corpus.prepare_cache`), in MB of text per second.

    OMP_NUM_THREADS=1 python benchmarks/ncffn/bpe_corpus.py [--mb 20] [--vocab 8192] [--text FILE]

The text is FILE, or the paper texts of ../shared/papers repeated to ``--mb`` megabytes. The two
phases are timed apart (the learned tokenizer is then given to a second, tokenize-only build), so
the figures size the paper preset's preparation: OpenWebText is ~40 GB, its BPE is learned on the
first ``data.bpe_sample_bytes`` (2 GB). Hugging Face ``tokenizers`` uses every core (Rayon), so
these are whole-machine rates. Target: tokenizing >= 1 MB/s on 2 shared cores (40 GB then takes
at most ~11 hours on them, far less on a GPU machine's cores).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tinyscope.studies.ncffn import bpe
from tinyscope.studies.ncffn.corpus import CorpusConfig, prepare_cache

PAPERS = Path(__file__).resolve().parents[3] / "shared" / "papers"


def make_text(path: Path, mb: float) -> Path:
    src = "".join(p.read_text(errors="replace") for p in sorted(PAPERS.glob("*.txt")))
    reps = max(1, int(mb * 1e6 / max(1, len(src.encode()))))
    path.write_text(src * reps)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0, help="megabytes of text to make from the paper texts")
    ap.add_argument("--vocab", type=int, default=8192, help="BPE entries to learn")
    ap.add_argument("--text", default="", help="a UTF-8 text file to use instead")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = Path(args.text) if args.text else make_text(tmp / "corpus.txt", args.mb)
        size = text.stat().st_size / 1e6
        t0 = time.perf_counter()
        folder = prepare_cache(CorpusConfig(paths=[str(text)], vocab_size=args.vocab, cache_dir=str(tmp / "a")),
                               [text])
        both = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = prepare_cache(CorpusConfig(paths=[str(text)], tokenizer=str(folder / "tokenizer.json"),
                                           cache_dir=str(tmp / "b")), [text])
        encode = time.perf_counter() - t0
        n = int(__import__("json").loads((again / "meta.json").read_text())["n_tokens"])
        vocab = bpe.load_tokenizer(folder / "tokenizer.json").get_vocab_size()
    learn = max(both - encode, 0.0)
    print(f"text {size:.1f} MB, BPE {vocab} entries, {n:,} tokens ({n / size / 1e6:.2f} M tokens per MB)")
    print(f"learn BPE: {learn:.1f} s ({size / max(learn, 1e-9):.2f} MB/s); "
          f"tokenize + write: {encode:.1f} s ({size / encode:.2f} MB/s, {n / encode / 1e6:.2f} M tokens/s)")


if __name__ == "__main__":
    main()
