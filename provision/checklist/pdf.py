"""Print the checklist's HTML to PDF with headless Chromium (Debian package ``chromium``).

Chromium runs as a subprocess with an argv list (no shell), a fresh profile directory,
and network-facing background services off; page size comes from the document's CSS
``@page`` rule, and ``--no-pdf-header-footer`` drops the date/URL lines Chromium would add.
Flags: https://developer.chrome.com/docs/chromium/headless (``--print-to-pdf``).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from provision.errors import ProvisionError

BROWSERS = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")
"""Executables tried in order; Debian and Ubuntu name the package's binary ``chromium``."""

PRINT_TIMEOUT_S = 120.0
"""Upper bound for one print; a checklist prints in about 2 s on a laptop-class CPU."""

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-pdf-header-footer",
)


class ChecklistError(ProvisionError):
    """The checklist could not be produced (no browser, or the browser failed to print)."""


def find_browser() -> str:
    """Path of the first Chromium-family browser on PATH.

    Raises:
        ChecklistError: If none is installed, naming the package to install.
    """
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    raise ChecklistError(
        "--format pdf needs headless Chromium: install it (the distribution's chromium package), "
        "or write HTML with --format html and print it from a browser"
    )


def print_argv(browser: str, html: Path, pdf: Path, profile: Path) -> list[str]:
    """The Chromium command line that prints ``html`` to ``pdf`` with a throwaway ``profile``."""
    return [browser, *_FLAGS, f"--user-data-dir={profile}", f"--print-to-pdf={pdf}", html.as_uri()]


def html_to_pdf(html: str, browser: str | None = None, timeout: float = PRINT_TIMEOUT_S) -> bytes:
    """Print an HTML document to PDF bytes.

    Args:
        html: A self-contained HTML document (inline CSS, no external assets).
        browser: Browser executable; :func:`find_browser` by default.
        timeout: Seconds before the browser is killed.

    Returns:
        The PDF file's bytes.

    Raises:
        ChecklistError: No browser, or it failed, timed out, or wrote no PDF.
    """
    exe = browser or find_browser()
    with tempfile.TemporaryDirectory(prefix="provision-checklist-") as tmp:
        page, pdf, profile = Path(tmp, "checklist.html"), Path(tmp, "checklist.pdf"), Path(tmp, "profile")
        page.write_text(html, encoding="utf-8")
        _run(print_argv(exe, page, pdf, profile), timeout)
        if not pdf.is_file() or pdf.stat().st_size == 0:
            raise ChecklistError(f"{exe} exited 0 but wrote no PDF")
        return pdf.read_bytes()


def _run(argv: list[str], timeout: float) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ChecklistError(f"{argv[0]} did not finish printing within {timeout:g} s") from None
    except OSError as exc:
        raise ChecklistError(f"{argv[0]}: cannot run: {exc.strerror}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ChecklistError(f"{argv[0]} exited {proc.returncode} while printing: {last}")
