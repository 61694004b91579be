"""The spec: the machine as a file (models, line-aware loader, cross-field rules)."""

from provision.spec.models import Spec

__all__ = ["Spec"]
