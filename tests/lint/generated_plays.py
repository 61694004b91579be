"""Write the plays provision generates at run time (detect, verify) as YAML files, for ansible-lint.

Usage: ``python -m tests.lint.generated_plays DIR``. The plays are data built in Python
(:func:`provision.detect.runner.detect_play`, :func:`provision.verify.remote.verify_play`);
written here in block style so that ansible-lint reads them as it reads the shipped playbooks.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from ruamel.yaml import YAML

from provision.detect.runner import detect_play
from provision.verify.remote import verify_play


def write_plays(out: Path) -> list[Path]:
    """Write ``detect.yml`` and ``verify.yml`` into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # a folded Jinja expression would leave trailing spaces
    written = []
    for name, play in (("detect.yml", detect_play()), ("verify.yml", verify_play())):
        path = out / name
        # ruamel indents the top-level sequence by the offset too; Ansible style starts at column 0.
        text = io.StringIO()
        yaml.dump(play, text)
        lines = text.getvalue().splitlines()
        path.write_text("---\n" + "\n".join(line[2:] for line in lines) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_plays(Path(sys.argv[1])):
        print(path)
