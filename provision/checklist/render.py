"""Render a :class:`~provision.checklist.items.Checklist` as Markdown (terminal) or printable HTML.

Templates live in the top-level ``templates/`` directory (``checklist.md.j2``,
``checklist.html.j2``). HTML is autoescaped because titles and text can come from a spec;
undefined template variables are errors.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from provision.checklist.items import Checklist
from provision.checklist.observe import Status
from provision.resources import data_dir

Paper = Literal["a4", "letter"]

_CSS_PAGE_SIZE: dict[Paper, str] = {"a4": "A4", "letter": "letter"}
"""CSS ``@page size`` keyword per paper (CSS Paged Media Level 3 page-size names)."""


_CODE_SPAN = re.compile(r"`([^`]+)`")

STATUS_LABELS: dict[Status, str] = {
    "confirmed": "confirmed",
    "not-confirmed": "NOT confirmed",
    "observed": "observed (your decision)",
    "not-observable": "not observable here",
}
"""How each observation status is printed; ``not-confirmed`` in capitals so it stands out on paper."""


@cache
def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(data_dir("templates")),
        autoescape=select_autoescape(("html.j2",), default_for_string=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["code_spans"] = code_spans
    env.globals["status_labels"] = STATUS_LABELS
    return env


def code_spans(text: str) -> Markup:
    """Escape ``text`` for HTML and turn Markdown backtick spans into ``<code>`` elements."""
    return Markup(_CODE_SPAN.sub(r"<code>\1</code>", str(escape(text))))


def render_markdown(checklist: Checklist) -> str:
    """Render the checklist as Markdown with ``- [ ]`` boxes, for ``rich.markdown`` or a file."""
    return _environment().get_template("checklist.md.j2").render(checklist=checklist)


def render_html(checklist: Checklist, paper: Paper = "a4") -> str:
    """Render a self-contained, printable HTML document (inline CSS, no external assets).

    Args:
        checklist: The checklist to print.
        paper: ``"a4"`` or ``"letter"``; sets CSS ``@page { size: ... }``.

    Returns:
        The HTML document as text, one box and one initials/date sign-off line per item.
    """
    template = _environment().get_template("checklist.html.j2")
    return template.render(checklist=checklist, page_size=_CSS_PAGE_SIZE[paper])
