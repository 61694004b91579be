"""The trust rule (provision/trust.py): owners, mode bits along the path, sticky directories, links at
every component, trees, venvs, the invoking user, and the venv probes that only read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from provision import regenerate, trust
from provision.detect.domains.python import TorchFact, VenvFact, parse_torch
from provision.detect.fact import Unknown
from provision.errors import SpecError
from provision.files import read_text
from provision.spec.models import PythonSpec
from provision.verify.launch import python_of

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="ownership checks need files owned by root and by others")
NOBODY = 65534
"""nobody's uid (and nogroup's gid) on Debian and Ubuntu: the other user of these tests."""


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root-owned 0755 directory (under /tmp: sticky, allowed above), run as root without sudo."""
    monkeypatch.delenv(trust.SUDO_VAR, raising=False)
    tmp_path.chmod(0o755)
    return tmp_path


def _file(path: Path, text: str = "", uid: int = 0, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path


def _venv(root: Path) -> Path:
    venv = root / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "lib64").symlink_to("lib")
    _file(venv / "pyvenv.cfg", f"home = {Path(sys.executable).parent}\nversion = 3.11.7\n")
    _file(site / "torch" / "__init__.py")
    return venv


# The invoking user


def test_the_invoking_user_is_sudo_uid_only_for_root() -> None:
    if ROOT:
        assert trust.invoking_uid({"SUDO_UID": "1000"}) == 1000
        for forged in ("0", "abc", "²", "-1", "99999999999", "4294967295", ""):
            assert trust.invoking_uid({"SUDO_UID": forged}) == 0, forged
    else:
        assert trust.invoking_uid({"SUDO_UID": "0"}) == os.getuid()


@needs_root
def test_a_user_who_is_not_root_is_the_invoking_user_whatever_sudo_uid_says() -> None:
    code = "from provision.trust import invoking_uid; print(invoking_uid({'SUDO_UID': '1000'}))"
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(trust.__file__).parents[1])},
        check=True,
    )
    assert done.stdout.strip() == str(NOBODY)


@needs_root
def test_the_invoking_users_files_are_trusted_and_no_one_elses(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _file(base / "spec.yaml", uid=NOBODY)
    assert trust.problem("file", str(spec)) == (f"{spec}: a file owned by uid {NOBODY} (nobody), not by root")
    monkeypatch.setenv(trust.SUDO_VAR, str(NOBODY))
    assert trust.problem("file", str(spec)) is None
    monkeypatch.setenv(trust.SUDO_VAR, "1000")
    assert "not by root or uid 1000" in str(trust.problem("file", str(spec)))


# Mode bits along the path


@needs_root
@pytest.mark.parametrize(
    ("mode", "said"), [(0o777, "writable by every user"), (0o757, "writable by every user")]
)
def test_a_directory_above_that_others_may_write_refuses_everything_below(
    base: Path, mode: int, said: str
) -> None:
    spec = _file(base / "shared" / "deep" / "spec.yaml")
    (base / "shared").chmod(mode)
    assert trust.problem("file", str(spec)) == f"{base / 'shared'}: {said} (mode {mode:04o}, owner root)"


@needs_root
def test_group_write_is_refused_unless_the_group_is_a_trusted_users_own(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _file(base / "spec.yaml", mode=0o664)
    os.chown(spec, 0, 100)  # Debian's "users" group
    assert "writable by group users" in str(trust.problem("file", str(spec)))
    os.chown(spec, 0, 0)  # root's group, no member listed
    assert trust.problem("file", str(spec)) is None
    os.chown(spec, NOBODY, NOBODY)  # nogroup is not nobody's private group (its name differs)
    monkeypatch.setenv(trust.SUDO_VAR, str(NOBODY))
    assert "writable by group nogroup" in str(trust.problem("file", str(spec)))


@needs_root
def test_a_user_private_group_of_the_invoking_user_may_write(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import grp
    import pwd

    # Ubuntu's useradd gives each user a group of the same name and a umask of 002 (login.defs
    # USERGROUPS_ENAB): a researcher's files are 0664 in a group only they are in.
    group = grp.struct_group(("alice", "x", 4242, []))
    user = pwd.struct_passwd(("alice", "x", 4242, 4242, "", "/home/alice", "/bin/sh"))
    monkeypatch.setattr(
        grp, "getgrgid", lambda gid: group if gid == 4242 else grp.struct_group(("g", "x", gid, []))
    )
    monkeypatch.setattr(
        pwd,
        "getpwnam",
        lambda name: (
            user if name == "alice" else pwd.struct_passwd((name, "x", 999, 999, "", "/", "/bin/sh"))
        ),
    )
    spec = _file(base / "spec.yaml", uid=4242, mode=0o664)
    os.chown(spec, 4242, 4242)
    monkeypatch.setenv(trust.SUDO_VAR, "4242")
    assert trust.problem("file", str(spec)) is None
    group = grp.struct_group(("alice", "x", 4242, ["mallory"]))  # another member listed
    assert "writable by group alice" in str(trust.problem("file", str(spec)))


# Sticky directories


@needs_root
def test_a_sticky_directory_is_allowed_above_never_as_the_last_part(base: Path) -> None:
    sticky = base / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    mine = _file(sticky / "spec.yaml")
    assert trust.problem("file", str(mine)) is None  # others cannot rename or remove it there
    assert trust.problem("dir", str(sticky)) == f"{sticky}: writable by every user (mode 1777, owner root)"
    assert trust.check_path(sticky, kind="dir", sticky_ok=True)
    # A name not created yet in it: anyone may create it first.
    assert "writable by every user" in str(trust.problem("dir", str(sticky / "venv"), missing_ok=True))
    assert "owned by uid 65534" in str(trust.problem("file", str(_file(sticky / "theirs", uid=NOBODY))))


# Links at every component


@needs_root
def test_a_link_is_followed_only_when_its_owner_and_directory_are_trusted(base: Path) -> None:
    real = _file(base / "real" / "spec.yaml")
    (base / "via").symlink_to(base / "real")
    assert trust.problem("file", str(base / "via" / "spec.yaml")) is None
    os.lchown(base / "via", NOBODY, NOBODY)
    assert trust.problem("file", str(base / "via" / "spec.yaml")) == (
        f"{base / 'via'}: a symbolic link owned by uid {NOBODY} (nobody), not by root"
    )
    (base / "last").symlink_to(real)
    os.lchown(base / "last", NOBODY, NOBODY)
    assert "a symbolic link owned by uid 65534" in str(trust.problem("file", str(base / "last")))


@needs_root
def test_a_trusted_link_to_an_untrusted_place_is_refused_at_the_target(base: Path) -> None:
    theirs = base / "theirs"
    _file(theirs / "spec.yaml")
    os.chown(theirs, NOBODY, NOBODY)
    (base / "a").mkdir()
    (base / "a" / "link").symlink_to("../theirs")  # relative, through ..
    assert trust.problem("file", str(base / "a" / "link" / "spec.yaml")) == (
        f"{theirs}: a directory owned by uid {NOBODY} (nobody), not by root"
    )


@needs_root
def test_a_link_loop_is_refused_after_forty_links(base: Path) -> None:
    (base / "x").symlink_to("y")
    (base / "y").symlink_to("x")
    assert trust.problem("file", str(base / "x")) == f"{base / 'x'}: more than 40 symbolic links"


@needs_root
def test_open_file_never_opens_a_fifo_or_a_device(base: Path) -> None:
    os.mkfifo(base / "fifo")
    with pytest.raises(trust.NotRegular, match="a FIFO"):
        trust.open_file(base / "fifo")  # would block without O_NONBLOCK, and is never opened
    (base / "zero").symlink_to("/dev/zero")
    with pytest.raises(trust.NotRegular, match="a character device"):
        trust.open_file(base / "zero")
    with pytest.raises(trust.Missing):
        trust.open_file(base / "none")


@needs_root
def test_the_reader_names_the_path_and_the_owner_in_one_line(base: Path) -> None:
    spec = _file(base / "spec.yaml", "python: {}\n", uid=NOBODY)
    with pytest.raises(SpecError) as raised:
        read_text(spec, what="spec", error=SpecError)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{spec}: refused, the spec file is not trusted: a file owned by uid 65534")
    assert trust.DOC in message


# Trees and venvs


@needs_root
def test_a_trusted_venv_passes(base: Path) -> None:
    venv = _venv(base)
    assert trust.problem("venv", str(venv)) is None
    assert python_of(str(venv)) == venv / "bin" / "python"


@needs_root
@pytest.mark.parametrize(
    "plant",
    ["pth-writable", "pth-owner", "site-packages-owner", "module-group-writable", "link-out", "dangling-tmp"],
)
def test_anything_in_the_venv_another_user_could_write_refuses_it(base: Path, plant: str) -> None:
    venv = _venv(base)
    site = venv / "lib" / "python3.11" / "site-packages"
    if plant == "pth-writable":
        _file(site / "evil.pth", "import os\n", mode=0o666)
    elif plant == "pth-owner":
        _file(site / "evil.pth", "import os\n", uid=NOBODY)
    elif plant == "site-packages-owner":
        os.chown(site, NOBODY, NOBODY)
    elif plant == "module-group-writable":
        (site / "torch" / "__init__.py").chmod(0o664)
        os.chown(site / "torch" / "__init__.py", 0, 100)
    elif plant == "link-out":
        theirs = base / "theirs"
        _file(theirs / "evil.py", uid=NOBODY)
        (site / "evil").symlink_to(theirs)
    else:
        (site / "later.pth").symlink_to("/tmp/provision-test-does-not-exist.pth")
    why = trust.problem("venv", str(venv))
    assert why is not None and "\n" not in why
    found = python_of(str(venv))
    assert isinstance(found, Unknown) and "the venv is not trusted" in found.unknown


@needs_root
def test_data_files_at_the_venv_top_do_not_matter_but_pyvenv_cfg_and_code_do(base: Path) -> None:
    # uv leaves `.lock` mode 0666 when it made the venv as root under umask 0 (seen on the real H200's
    # /opt/torch/.venv); the interpreter never reads it, nor .gitignore or CACHEDIR.TAG.
    venv = _venv(base)
    _file(venv / ".lock", "", mode=0o666)
    _file(venv / "CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n", uid=NOBODY)
    assert trust.problem("venv", str(venv)) is None
    (venv / "pyvenv.cfg").chmod(0o666)
    assert "pyvenv.cfg: " in str(trust.problem("venv", str(venv)))
    (venv / "pyvenv.cfg").chmod(0o644)
    theirs = _file(base / "theirs.py", uid=NOBODY)
    (venv / "sitecustomize.py").symlink_to(theirs)  # a link at the top is followed and checked
    assert "owned by uid 65534" in str(trust.problem("venv", str(venv)))
    (venv / "sitecustomize.py").unlink()
    assert trust.problem("tree", str(venv)) is not None  # a plain tree check still counts every file


@needs_root
def test_a_directory_a_link_leads_to_is_checked_as_a_tree(base: Path) -> None:
    venv = _venv(base)
    outside = base / "shared-lib"
    _file(outside / "pkg" / "mod.py", uid=NOBODY)
    (venv / "lib" / "python3.11" / "site-packages" / "pkg").symlink_to(outside / "pkg")
    assert f"{outside / 'pkg' / 'mod.py'}: a file owned by uid 65534" in str(trust.problem("venv", str(venv)))


@needs_root
def test_the_interpreter_the_venv_names_is_checked(base: Path) -> None:
    venv = _venv(base)
    theirs = base / "their-python" / "bin"
    theirs.mkdir(parents=True)
    os.chown(theirs, NOBODY, NOBODY)
    (venv / "pyvenv.cfg").write_text(f"home = {theirs}\n")
    assert (
        trust.problem("venv", str(venv)) == f"{theirs}: a directory owned by uid 65534 (nobody), not by root"
    )
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(theirs / "python3")
    assert "owned by uid 65534" in str(trust.problem("venv", str(venv)))


@needs_root
def test_a_pyvenv_cfg_that_is_a_link_to_a_device_is_not_read(base: Path) -> None:
    venv = _venv(base)
    (venv / "pyvenv.cfg").unlink()
    (venv / "pyvenv.cfg").symlink_to("/dev/zero")
    assert str(trust.problem("venv", str(venv))).startswith("/dev/zero: writable by every user")
    with pytest.raises(trust.NotRegular):  # and were it read on its own: never opened
        trust.venv_home(venv)


@needs_root
def test_a_venv_not_created_yet_is_judged_by_where_it_would_go(base: Path) -> None:
    assert trust.problem("venv", str(base / "new" / "venv")) is None
    theirs = base / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    assert "owned by uid 65534" in str(trust.problem("venv", str(theirs / "venv")))
    assert "writable by every user" in str(trust.problem("venv", "/tmp/provision-venv-test-new"))


# One rule on both sides


def test_the_ansible_module_is_the_trust_module_verbatim() -> None:
    module, text = regenerate.trust_module()
    assert module.read_text(encoding="utf-8") == text, (
        f"{module} is stale: run `python3 -m provision.regenerate`"
    )


@needs_root
def test_the_host_side_program_answers_as_the_controller_does(base: Path) -> None:
    venv = _venv(base)
    run = [sys.executable, "-I", trust.__file__, "venv", str(venv)]
    assert subprocess.run(run, capture_output=True, text=True, check=True).stdout == "trusted\n"
    os.chown(venv / "bin", NOBODY, NOBODY)
    said = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert said == f"untrusted: {trust.problem('venv', str(venv))}\n"
    assert subprocess.run([*run[:3], "bogus"], capture_output=True, check=False).returncode == 2


# The spec's venv path and the venv probes


@pytest.mark.parametrize(
    "venv",
    [
        "/",
        "/etc",
        "/usr",
        "/usr/local/venv",
        "/proc/self",
        "/tmp/venv",
        "/var/tmp/v",
        "/dev/shm/v",
        "/opt",
        "/srv",
        "/home",
        "/home/u",
        "/root",
        "/var/lib/v",
    ],
)
def test_system_shared_and_top_level_directories_are_refused_for_the_venv(venv: str) -> None:
    with pytest.raises(ValidationError, match=r"must be a directory of its own"):
        PythonSpec(interpreter="3.12", venv=venv)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "venv", ["/opt/venv", "/opt/torch/.venv", "/srv/ml/env", "/home/me/venv", "/root/venv", "/var/opt/x/v"]
)
def test_a_venv_of_its_own_is_accepted_anywhere_else(venv: str) -> None:
    assert PythonSpec(interpreter="3.12", venv=venv).venv == venv  # type: ignore[arg-type]


def _planted_venv(root: Path) -> tuple[Path, Path]:
    """A venv whose bin/python, if run, leaves a marker file: what an attacker would plant."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    marker = root / "ran"
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\necho torch 9.9.9\n")
    python.chmod(0o755)
    site = venv / "lib" / "python3.12" / "site-packages" / "torch"
    site.mkdir(parents=True)
    (site / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.3\n")
    return venv, marker


def test_venv_probes_never_run_a_file_in_the_venv(tmp_path: Path) -> None:
    venv, marker = _planted_venv(tmp_path)
    for fact in (TorchFact, VenvFact):
        argv = fact.command(str(venv))
        assert argv[0] == "sh" and not any(a.startswith(str(venv) + "/") for a in argv), fact.id
        subprocess.run(argv, capture_output=True, check=False, timeout=10)
    assert not marker.exists()


def test_torch_probe_reads_version_py_and_pyvenv_cfg(tmp_path: Path) -> None:
    venv, _ = _planted_venv(tmp_path)
    out = subprocess.run(TorchFact.command(str(venv)), capture_output=True, text=True, timeout=10)
    torch = parse_torch(out.stdout, out.returncode)
    assert not isinstance(torch, Unknown), out.stdout
    assert (torch.venv, torch.version, torch.cuda, torch.python) == (
        str(venv),
        "2.11.0+cu130",
        "13.0",
        "3.12.3",
    )


def test_torch_probe_reads_a_bounded_prefix_of_a_device(tmp_path: Path) -> None:
    venv, _ = _planted_venv(tmp_path)
    version_py = next(venv.glob("lib/*/site-packages/torch/version.py"))
    version_py.unlink()
    version_py.symlink_to("/dev/zero")
    out = subprocess.run(TorchFact.command(str(venv)), capture_output=True, text=True, timeout=10)
    assert len(out.stdout) < 1000


def test_torch_probe_on_a_missing_venv_names_it(tmp_path: Path) -> None:
    out = subprocess.run(
        TorchFact.command(str(tmp_path / "none")), capture_output=True, text=True, timeout=10
    )
    assert parse_torch(out.stdout, out.returncode) == Unknown(
        unknown=f"torch: no virtual environment at {tmp_path / 'none'}"
    )


@pytest.mark.parametrize("target", ["/dev/zero", "secret"])
def test_the_venv_probe_does_not_follow_a_pyvenv_cfg_link(tmp_path: Path, target: str) -> None:
    venv, _ = _planted_venv(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("version = 3.12.3\nroot-only = hunter2\n")
    secret.chmod(0o600)
    (venv / "pyvenv.cfg").unlink()
    (venv / "pyvenv.cfg").symlink_to(target if target.startswith("/") else secret)
    out = subprocess.run(VenvFact.command(str(venv)), capture_output=True, text=True, timeout=10)
    said = out.stdout + out.stderr
    assert "hunter2" not in said and len(said) < 1000
    assert "Too many levels of symbolic links" in said and out.returncode == 1


def test_the_venv_probe_prints_only_the_keys_it_parses(tmp_path: Path) -> None:
    venv, _ = _planted_venv(tmp_path)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.3\nprompt = token-abc123\n")
    out = subprocess.run(VenvFact.command(str(venv)), capture_output=True, text=True, timeout=10)
    assert "version = 3.12.3" in out.stdout and "token-abc123" not in out.stdout
