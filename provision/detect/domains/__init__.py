"""Facts by domain: each module holds its typed models, probes, pure parsers and Fact classes.

Each module exports ``FACTS`` (its Fact classes) and ``FIELDS`` (how its
:class:`~provision.detect.facts.Facts` fields are derived from the parsed outputs).
:mod:`provision.detect.registry` collects them.
"""
