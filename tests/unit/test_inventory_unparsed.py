"""An inventory no Ansible plugin can parse is refused in one line with each plugin's reason, not
Ansible's warnings followed by "no host matches 'all'"."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision.errors import ProvisionError
from provision.inventory import forget, read_inventory


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("bad.ini", "[gpu\nhost1 ansible_host=192.0.2.1\n", "ini: "),
        ("bad.yml", "all:\n  hosts: [a\n", "yaml: "),
    ],
)
def test_an_unparsable_inventory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, reason: str
) -> None:
    forget()
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProvisionError) as raised:
        read_inventory(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: Ansible cannot parse it as an inventory: ")
    assert reason in message and "\n" not in message
    assert "<<< caused by >>>" not in message and "Origin:" not in message  # ansible-core 2.19's detail
    plugin_reason = message.split(reason, 1)[1]
    assert message.count(plugin_reason) == 1  # each plugin's reason said once
    assert "[WARNING]" not in capsys.readouterr().err


def test_a_good_inventory_still_reads(tmp_path: Path) -> None:
    forget()
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\ngpu1 ansible_host=192.0.2.1\ngpu2 ansible_host=192.0.2.2\n")
    assert [h.name for h in read_inventory(path).hosts] == ["gpu1", "gpu2"]


def test_a_directory_with_one_unparsable_file_still_reads_its_hosts(tmp_path: Path) -> None:
    """Only a source no plugin parses at all is refused (``inventory_unparsed_is_failed``); Ansible
    warns about the stray file and reads the rest, as it does without provision. The hosts file has
    no extension: ansible-core before 2.19 skips ``*.ini`` inside a directory (its default
    ``inventory_ignore_extensions``)."""
    forget()
    (tmp_path / "hosts").write_text("[gpu]\ngpu1 ansible_host=192.0.2.1\n")
    (tmp_path / "notes.txt").write_text("[[[ not an inventory\n")
    assert [h.name for h in read_inventory(tmp_path).hosts] == ["gpu1"]
