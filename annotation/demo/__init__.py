"""The demo project: a fictional product's help centre, judged by a lead and two annotators.

The corpus, queries, protocol and intended answers under this folder were written for Assay;
the three runs are produced on the fly by the built-in baseline systems.
"""
