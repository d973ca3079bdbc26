"""Stratified query sampling from search logs: the pure core of ``sample_queries`` and log upload.

Chapter 7, step 1 of the method: take queries from your own logs, stratify them (head, torso,
tail by traffic, plus the known failures pure sampling never finds), and sample a quota from
each stratum, recording every query's inclusion probability. Three calls, in this order::

    definition = StrataDefinition()                    # or StrataDefinition.from_json(stored)
    stats = ingest_log(path, columns=ColumnMap.parse("query=q"), definition=definition,
                       on_progress=lambda fraction, message: ...)
    strata = stratify(stats, definition)               # table, chart data, labels
    sample = sample_queries(stats, strata, quotas=DEFAULT_QUOTAS, seed=7,
                            weighted=False, exclude=already_in_project)

- :mod:`sampling.ingest`: DuckDB ingestion (formats, sessions, signals, privacy),
  with its SQL in :mod:`sampling.sql` and the pass over the file, with the
  repaired copies read when a file needs one, in :mod:`sampling.read`;
- :mod:`sampling.stats`: the per-query statistics it returns and persists;
- :mod:`sampling.strata`: the strata definition and the stratification;
- :mod:`sampling.options`: a strata definition from typed options (commands, form);
- :mod:`sampling.draw`: quotas and the within-stratum draws;
- :mod:`sampling.text`: normalisation and the personal-data screen;
- :mod:`sampling.source`: what a log file is and how each field is read.

Pure core: no Django; it is what the Django side, the command, the tests and the benchmark
call.
"""

from __future__ import annotations

from .draw import (
    DEFAULT_QUOTAS,
    SEED_LIMIT,
    Sample,
    SampledQuery,
    Signals,
    StratumDraw,
    check_seed,
    inclusion_probabilities,
    parse_quotas,
    parse_seed,
    sample_queries,
    systematic_pps,
)
from .ingest import EngineSettings, ProgressCallback, ingest_log
from .source import FIELDS, ColumnMap, LogError, LogFormat
from .stats import IngestReport, LogStats, PiiCount, QueryStats, load_stats
from .strata import (
    STRATA,
    DefinitionError,
    FailureRule,
    PiiPolicy,
    Strata,
    StrataDefinition,
    StratumName,
    StratumSummary,
    rank_frequency_points,
    stratify,
)
from .text import PII_KINDS, Normalisation, PiiKind, normalise_query, pii_screen

__all__ = [
    "DEFAULT_QUOTAS",
    "FIELDS",
    "PII_KINDS",
    "SEED_LIMIT",
    "STRATA",
    "ColumnMap",
    "DefinitionError",
    "EngineSettings",
    "FailureRule",
    "IngestReport",
    "LogError",
    "LogFormat",
    "LogStats",
    "Normalisation",
    "PiiCount",
    "PiiKind",
    "PiiPolicy",
    "ProgressCallback",
    "QueryStats",
    "Sample",
    "SampledQuery",
    "Signals",
    "Strata",
    "StrataDefinition",
    "StratumDraw",
    "StratumName",
    "StratumSummary",
    "check_seed",
    "inclusion_probabilities",
    "ingest_log",
    "load_stats",
    "normalise_query",
    "parse_quotas",
    "parse_seed",
    "pii_screen",
    "rank_frequency_points",
    "sample_queries",
    "stratify",
    "systematic_pps",
]
