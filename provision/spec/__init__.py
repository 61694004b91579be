"""The spec: the machine as a file (models, line-aware loader, cross-field rules).

Empty on purpose: :mod:`provision.spec.document` reads a spec file without loading the models.
"""
