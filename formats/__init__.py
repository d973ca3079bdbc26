"""The file formats of a retrieval evaluation, in one place that every app imports from.

:mod:`formats.text` opens files (gzip or not) and reports problems with file and line;
:mod:`formats.trec` reads and writes TREC runs and qrels (as records and as numpy columns);
:mod:`formats.beir` reads BEIR corpora and queries. Pure: no Django import.
"""
