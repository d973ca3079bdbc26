"""Options shared by the commands that score runs (`evaluate`, `compare`)."""

from __future__ import annotations

from argparse import ArgumentParser

from assay import options as bounded


def add_contract_arguments(parser: ArgumentParser, *, relevance: str) -> None:
    """The metric contract's options: nDCG gain, relevance threshold, queries without a
    relevant document. ``relevance`` says which measures the threshold applies to."""
    parser.add_argument(
        "--gain",
        choices=["exponential", "linear"],
        default="exponential",
        help="nDCG gain: 2^grade - 1 (exponential, default) or grade (linear, trec_eval's)",
    )
    parser.add_argument(
        "--rel-threshold",
        type=bounded.grade,
        default=1,
        metavar="T",
        help=f"grade >= T is relevant for {relevance} (default 1)",
    )
    parser.add_argument(
        "--empty",
        choices=["skip", "zero"],
        default="skip",
        help="queries of the qrels without a relevant document: left out of the mean "
        "(skip, default) or scored 0 (zero, as trec_eval -c)",
    )
