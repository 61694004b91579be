"""Installable components, each declared once (see :mod:`provision.components.base`)."""
