"""Each family's initramfs lister, its shell filter run for real on the lister's output format, into
the one neutral :class:`Initramfs` fact.

lsinitrd's output is constructed (no dracut image here) in the layout of dracut's ``lsinitrd.sh``
(https://github.com/dracutdevs/dracut/blob/master/lsinitrd.sh): the image line, the dracut build
banner and modules between ``====`` rules, then ``list_files``, ``cpio --extract --verbose --list``
rows (``ls -l`` style) sorted on the path.
"""

from __future__ import annotations

import subprocess

from provision.detect.domains.driver import Initramfs, parse_initramfs
from provision.os.debian.probes import INITRAMFS_LISTER as DEBIAN
from provision.os.redhat.probes import INITRAMFS_LISTER as REDHAT

LSINITRD = """\
Image: /boot/initramfs-5.14.0-503.14.1.el9_5.x86_64.img: 31M
========================================================================
Early CPIO image
========================================================================
drwxr-xr-x   3 root     root            0 Nov 30 09:14 .
-rw-r--r--   1 root     root            2 Nov 30 09:14 early_cpio
========================================================================
Version: dracut-057-70.git20240819.el9

Arguments:  --kver '5.14.0-503.14.1.el9_5.x86_64' -f

dracut modules:
kernel-modules
========================================================================
drwxr-xr-x  12 root     root            0 Nov 30 09:14 .
drwxr-xr-x   2 root     root            0 Nov 30 09:14 etc/modprobe.d
-rw-r--r--   1 root     root           26 Nov 30 09:14 etc/modprobe.d/nvidia-blacklist-nouveau.conf
lrwxrwxrwx   1 root     root           39 Nov 30 09:14 etc/modprobe.d/dist.conf -> ../lib/dist.conf
-rw-r--r--   1 root     root          102 Jan  8  2025 etc/modprobe.d/firewalld-sysctls.conf
-rw-r--r--   1 root     root           77 Nov 30 09:14 usr/lib/modprobe.d/dist-blacklist.conf
-rw-r--r--   1 root     root           10 Nov 30 09:14 usr/etc/modprobe.d/not.conf.bak
========================================================================
"""
LSINITRAMFS = "etc/modprobe.d\netc/modprobe.d/nvidia-blacklist-nouveau.conf\nusr/lib/modprobe.d/x.conf\n"


def _run(tool: str, listing: str, printed: str) -> str:
    """The family's listing with ``tool`` a shell function printing ``printed``, as the probe runs it."""
    script = f'{tool}() {{ cat <<"EOF"\n{printed}EOF\n}}; img=/boot/x.img; echo "lister {tool}"; {listing}'
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False, timeout=10)
    return f"image /boot/x.img 100\n{proc.stdout}conf /etc/modprobe.d/nvidia-blacklist-nouveau.conf 90\n"


def test_lsinitrd_rows_give_the_paths_in_the_image() -> None:
    parsed = parse_initramfs(_run(*REDHAT, LSINITRD), 0)
    assert isinstance(parsed, Initramfs)
    assert parsed.contents == (
        "etc/modprobe.d/nvidia-blacklist-nouveau.conf",
        "etc/modprobe.d/dist.conf",
        "etc/modprobe.d/firewalld-sysctls.conf",
    )
    assert parsed.in_effect("/etc/modprobe.d/nvidia-blacklist-nouveau.conf") is True


def test_lsinitramfs_paths_and_lsinitrd_rows_read_as_the_same_fact() -> None:
    debian = parse_initramfs(_run(*DEBIAN, LSINITRAMFS), 0)
    redhat = parse_initramfs(_run(*REDHAT, LSINITRD), 0)
    assert isinstance(debian, Initramfs) and isinstance(redhat, Initramfs)
    assert debian.contents == ("etc/modprobe.d/nvidia-blacklist-nouveau.conf",)
    assert debian.in_effect("/etc/modprobe.d/nvidia-blacklist-nouveau.conf") is redhat.in_effect(
        "/etc/modprobe.d/nvidia-blacklist-nouveau.conf"
    )


def test_a_conf_missing_from_the_image_is_not_in_effect_and_short_rows_are_skipped() -> None:
    out = (
        "image /boot/x.img 100\nlister lsinitrd\nlisted -rw-r--r-- 1 root\nconf /etc/modprobe.d/new.conf 90\n"
    )
    parsed = parse_initramfs(out, 0)
    assert isinstance(parsed, Initramfs) and parsed.contents == ()
    assert parsed.in_effect("/etc/modprobe.d/new.conf") is False
