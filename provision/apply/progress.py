"""Live progress of an Ansible run from ansible-runner events: one line per finished task and host."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

_DONE = {
    "runner_on_ok": ("ok", "green"),
    "runner_on_failed": ("failed", "red"),
    "runner_on_unreachable": ("unreachable", "red"),
    "runner_on_skipped": ("skipped", "dim"),
}


class Progress:
    """Context manager that shows the running task and prints each task result as it lands."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._status: Status = console.status("Starting Ansible")
        self._task = ""
        self._done: dict[str, int] = {}  # host -> finished task results, for the per-host tally

    def __enter__(self) -> Progress:
        self._status.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._status.stop()

    def on_event(self, event: dict[str, Any]) -> None:
        """ansible-runner event handler: update the spinner, print finished tasks."""
        kind, data = event.get("event", ""), event.get("event_data", {})
        if kind == "playbook_on_task_start":
            self._task = str(data.get("task", ""))
            self._status.update(self._status_text())
        elif kind in _DONE:
            self._tally(str(data.get("host", "?")))
            word, style = _DONE[kind]
            if kind == "runner_on_failed" and data.get("ignore_errors"):
                word, style = "ignored", "yellow"
            if data.get("res", {}).get("changed"):
                word, style = "changed", "yellow"
            if kind == "runner_on_skipped" or data.get("task_action", "").endswith("validate_argument_spec"):
                return
            seconds = f" ({data['duration']:.1f} s)" if isinstance(data.get("duration"), (int, float)) else ""
            where = escape(f"{data.get('host', '?')}: {data.get('task', '')}{seconds}")
            self._console.print(f"  [{style}]{word:<11}[/] {where}")

    def _tally(self, host: str) -> None:
        self._done[host] = self._done.get(host, 0) + 1
        self._status.update(self._status_text())

    def _status_text(self) -> str:
        """The running task, and with several hosts each host's count of finished tasks."""
        if len(self._done) < 2:
            return escape(self._task)
        hosts = " ".join(f"{h}:{n}" for h, n in sorted(self._done.items()))
        return escape(f"{self._task}  [{hosts}]")
