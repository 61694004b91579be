"""``provision import``: the spec of a machine as it is, so that ``plan`` on it is empty.

The main property runs on every real capture of the repository (``tests/fixtures/raw/`` and
``tests/fixtures/detect/``): the written spec validates, and planned against the same capture it
changes nothing. The choices the facts leave open (the driver's source, the holds, a library built
for another CUDA, a torch without a CUDA variant) are checked on edited copies of the real H200
facts; the fleet form on an inventory of saved hosts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from ruamel.yaml import YAML

from provision.detect.domains.python import VenvCandidate, VenvSearch
from provision.detect.facts import Facts, Unknown
from provision.detect.runner import facts_from_raw
from provision.fleet.mapping import load_fleet
from provision.importing.draft import NotImportable, updated
from provision.importing.workflow import Source, chosen_venv, import_one
from provision.spec.models import Spec
from tests.unit.factories import CATALOG, ROOT, by_host, fresh_ubuntu, invoke, locked, one_plan, pkg

pytestmark = pytest.mark.usefixtures("no_colour")


def _constructed(capture: Path) -> bool:
    """A capture made in real output formats, not read from a machine (its README says so)."""
    readme = capture / "README.md"
    return readme.is_file() and readme.read_text(encoding="utf-8").startswith("Constructed")


CAPTURES = sorted(
    d
    for base in ("raw", "detect")
    for d in (ROOT / "tests" / "fixtures" / base).iterdir()
    if d.is_dir() and not _constructed(d)
)
H200_RAW = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"
PARTIAL = "h200x2-ubuntu2404"  # tests/fixtures/detect/h200x2-ubuntu2404: nvidia-smi outputs only, no OS


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda d: f"{d.parent.name}/{d.name}")
def test_every_real_capture_imports_to_a_spec_whose_plan_is_empty(capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "imported.yaml"
    result = invoke("import", "--from-raw", str(capture), "--out", str(out))
    if capture.name == PARTIAL and capture.parent.name == "detect":
        assert result.exit_code == 1
        assert result.stderr.strip() == (
            "error: cannot import: the OS was not read: no output from the os-release probe; a spec names "
            "its distribution"
        )
        assert not out.exists()
        return
    assert result.exit_code == 0, result.output
    assert invoke("validate", str(out)).exit_code == 0
    planned = invoke("plan", str(out), "--from-raw", str(capture), "--json")
    plan = one_plan(json.loads(planned.stdout))
    # A capture older than some probes plans no change but is not confirmed to match; the newest
    # capture of the H200 holds every probe the invariants read, and matches.
    unread = [w["rule"] for w in plan["warnings"] if w["unconfirmed"]]
    assert not unread or capture != H200_RAW
    expected = (
        f"No changes planned, but the machine is not confirmed to match the spec: {len(unread)} warning(s) "
        "name facts that could not be read."
        if unread
        else "No changes. The machine matches the spec."
    )
    assert (planned.exit_code, plan["summary"]) == (0, expected)
    assert {s["action"] for s in plan["steps"]} == {"noop"}
    assert plan["blockers"] == []
    lock = json.loads((tmp_path / "imported.lock.json").read_text())
    assert Spec.model_validate(lock["spec"]) == Spec.model_validate(plan["spec"])


def test_the_h200_imports_as_its_shipped_spec_says_with_the_reasons(tmp_path: Path) -> None:
    out = tmp_path / "h200.yaml"
    assert invoke("import", "--from-raw", str(H200_RAW), "--out", str(out)).exit_code == 0
    text = out.read_text()
    spec = YAML(typ="safe").load(text)
    assert spec["driver"] == {
        "branch": 580,
        "flavor": "open",
        "version": "580.159.04",
        "source": "preinstalled",
        "hold": False,
    }
    assert spec["cuda"] == {"toolkit": "13.0", "cudnn": "9.14.0.64", "nccl": "2.28.3"}
    assert spec["python"] == {
        "interpreter": "3.12",
        "venv": "/opt/torch/.venv",
        "torch": "2.11.0",
        "cuda_variant": "cu130",
    }
    assert "# the loaded module is the open one\n  flavor: open" in text
    assert "no NVIDIA driver package is installed" in text
    assert "with driver.hold: true, plan would: repository: apt pins" in text.replace("\n  #   ", " ")
    assert f"`provision plan {out.name}` on {H200_RAW.name}: No changes." in text


def test_every_section_an_import_does_not_write_is_named_in_its_header(tmp_path: Path) -> None:
    # repository: a mirror is not read (README "Importing a machine"); the header speaks of the key only.
    out = tmp_path / "h200.yaml"
    assert invoke("import", "--from-raw", str(H200_RAW), "--out", str(out)).exit_code == 0
    text = out.read_text()
    header = [line.removeprefix("# ") for line in text.splitlines() if line.startswith("#")]
    not_imported = next(line for line in header if line.startswith("Not imported (their defaults apply): "))
    named = set(not_imported.split(": ", 1)[1].rstrip(".").split(", "))
    named |= {line.removeprefix("- ").split(":")[0].split(".")[0] for line in header if line.startswith("- ")}
    absent = set(Spec.model_fields) - set(YAML(typ="safe").load(text)) - {"repository"}
    assert absent and absent <= named, absent - named


def _h200(**changes: object) -> Facts:
    return facts_from_raw(H200_RAW, host="gpu01").model_copy(update=changes)


def test_a_driver_from_nvidias_repository_held_with_provisions_guard_imports_as_such() -> None:
    stack = (
        pkg("nvidia-open", "580.159.04-1", "hold ok installed"),
        pkg("libnvidia-compute-580", "580.159.04-1", "hold ok installed"),
        pkg("libcudnn9-cuda-13", "9.14.0.64-1", "hold ok installed"),
    )
    first = import_one(_h200(packages=stack, origins=Unknown(unknown="not probed")), CATALOG)
    assert first.data["driver"]["source"] == "nvidia-repo"
    assert first.data["driver"]["hold"] is False  # held, but no pins or guard of provision's: not its holds
    assert "with driver.hold: true, plan would:" in " ".join(first.notes["driver.hold"])
    spec = Spec.model_validate(updated(first.data, {"driver.hold": True}))  # the spec provision applied
    again = import_one(_h200(packages=stack, package_locks=locked(spec)), CATALOG)
    assert (again.data["driver"]["source"], again.data["driver"]["hold"]) == ("nvidia-repo", True)
    assert not again.plan.changes and not again.plan.refused
    assert again.notes["driver.source"] == ["nvidia-open from NVIDIA's repository is installed"]


def test_nccl_built_for_another_cuda_is_left_out_with_what_keeping_it_would_do() -> None:
    base = _h200()
    assert not isinstance(base.packages, Unknown)
    other = tuple(pkg(p.name, p.version.replace("+cuda13.0", "+cuda12.9")) for p in base.packages)
    settled = import_one(base.model_copy(update={"packages": other}), CATALOG)
    assert "nccl" not in settled.data["cuda"] and settled.data["cuda"]["cudnn"] == "9.14.0.64"
    (note,) = settled.notes["cuda.nccl"]
    assert note.startswith(
        "libnccl2 2.28.3-1+cuda12.9 (built for another CUDA than 13.0) installed; cuda.nccl"
    )
    assert note.split("; ")[2].startswith(
        "with cuda.nccl kept, plan would: repository: NVIDIA CUDA repository for ubuntu2404"
    )
    assert note.endswith("; nccl: install libnccl2, libnccl-dev 2.28.3 built for CUDA 13.0")
    assert not settled.plan.changes


def test_a_torch_without_a_cuda_variant_tag_leaves_python_torch_out() -> None:
    base = _h200()
    assert not isinstance(base.torch, Unknown)
    settled = import_one(
        base.model_copy(update={"torch": base.torch.model_copy(update={"version": "2.11.0"})}), CATALOG, None
    )
    assert "torch" not in settled.data["python"] and "cuda_variant" not in settled.data["python"]
    assert any("no variant tag" in n for n in settled.notes["python.venv"])
    assert not settled.plan.changes


def test_a_machine_without_a_driver_gets_the_catalogs_long_term_branch_and_a_plan_that_installs_it() -> None:
    base = _h200(driver=Unknown(unknown="NVIDIA kernel module not loaded"), packages=())
    settled = import_one(base, CATALOG)
    lts = [b.branch for b in CATALOG.driver_branches.values() if b.type == "LTSB" and b.eol != "EOL"]
    assert settled.data["driver"] == {"branch": max(lts), "flavor": "auto", "source": "nvidia-repo"}
    assert (
        "the catalog's newest long-term support branch (LTSB) for hopper" in settled.notes["driver.branch"][0]
    )
    assert any(s.component.value == "driver" for s in settled.plan.changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"gpus": Unknown(unknown="nvidia-smi: not found"), "nvidia_pci": ()},
            "no NVIDIA GPU seen (nvidia-smi: not found; lspci shows no NVIDIA GPU function); "
            "--gpus MODEL:COUNT names them",
        ),
        (
            {"os": Unknown(unknown="cat: /etc/os-release: No such file")},
            "the OS was not read: cat: /etc/os-release: No such file; a spec names its distribution",
        ),
    ],
)
def test_facts_a_spec_cannot_be_written_from_are_refused_with_the_reason(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(NotImportable, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        import_one(_h200(**changes), CATALOG)


def test_a_gpu_the_catalog_does_not_know_is_refused() -> None:
    base = _h200()
    assert not isinstance(base.gpus, Unknown)
    odd = tuple(g.model_copy(update={"name": "NVIDIA Future X9"}) for g in base.gpus)
    with pytest.raises(
        NotImportable, match='nvidia-smi names GPU 0 "NVIDIA Future X9" is not a GPU model of the catalog'
    ):
        import_one(base.model_copy(update={"gpus": odd}), CATALOG)


def test_the_venv_with_torch_is_chosen_and_the_others_named() -> None:
    found = VenvSearch(
        roots=("/opt", "/srv"),
        found=(VenvCandidate(path="/opt/a"), VenvCandidate(path="/opt/torch/.venv", torch="2.11.0+cu130")),
    )
    assert chosen_venv(found) == (
        "/opt/torch/.venv",
        (
            "python.venv",
            "found under /opt and /srv with torch 2.11.0+cu130; also there: /opt/a "
            "(--venv PATH imports another)",
        ),
    )
    none = chosen_venv(VenvSearch(roots=("/opt", "/srv"), found=(VenvCandidate(path="/opt/a"),)))
    assert none == (
        None,
        ("python", "no venv with torch under /opt and /srv (venvs: /opt/a); give --venv PATH to import one"),
    )
    assert chosen_venv(Unknown(unknown="find: not found"))[0] is None


def test_a_live_import_searches_the_venv_then_detects_with_it(mocker: MockerFixture, tmp_path: Path) -> None:
    search = mocker.patch(
        "provision.importing.workflow.search_venv",
        return_value=(
            "/opt/torch/.venv",
            ("python.venv", "found under /opt and /srv with torch 2.11.0+cu130"),
        ),
    )
    detect = mocker.patch("provision.detect.runner.detect_local", return_value=_h200())
    result = invoke("import", "--out", str(tmp_path / "box.yaml"))
    assert result.exit_code == 0, result.output
    search.assert_called_once_with()
    detect.assert_called_once_with(venv="/opt/torch/.venv")
    assert "# found under /opt and /srv with torch 2.11.0+cu130" in (tmp_path / "box.yaml").read_text()


def test_an_existing_file_is_kept_unless_forced_and_the_write_leaves_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    out.write_text("mine\n")
    refused = invoke("import", "--from-raw", str(H200_RAW), "--out", str(out))
    assert refused.exit_code == 1
    assert refused.stderr.strip() == f"error: {out} exists: give --force to replace it, or another --out"
    assert out.read_text() == "mine\n"
    assert invoke("import", "--from-raw", str(H200_RAW), "--out", str(out), "--force").exit_code == 0
    assert out.read_text().startswith("# Imported by `provision import`")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.lock.json", "spec.yaml"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--facts", "f.json", "--from-raw", "d"],
            "--facts and --from-raw are different sources of facts: give one",
        ),
        (["-l", "gpu01"], "--limit selects hosts of an inventory: give -i INVENTORY too"),
        (["-i", "hosts.ini"], "an inventory's import is several files: give --out DIR"),
        (["--from-raw", "nowhere"], "nowhere: no such raw probe directory"),
        (
            ["--out", "missing/dir/spec.yaml", "--from-raw", str(H200_RAW)],
            "--out missing/dir/spec.yaml: directory missing/dir does not exist",
        ),
    ],
)
def test_bad_options_get_one_line_and_nothing_is_written(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("import", *args)
    assert result.exit_code == 1
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_json_is_one_document_with_the_spec_its_reasons_and_the_plan(tmp_path: Path) -> None:
    result = invoke("import", "--from-raw", str(H200_RAW), "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 0
    assert (doc["outcome"], doc["written"], doc["fleet"]) == ("imported", [], None)
    assert doc["format_version"] == 2 and [h["host"] for h in doc["hosts"]] == [H200_RAW.name]
    host = by_host(doc)[H200_RAW.name]
    assert (host["spec"], host["summary"], host["changes"]) == (
        "h200-sxm-x1-ubuntu2404",
        "No changes. The machine matches the spec.",
        [],
    )
    shape = doc["specs"]["h200-sxm-x1-ubuntu2404"]
    assert shape["spec"]["driver"]["source"] == "preinstalled"
    assert shape["notes"]["driver.flavor"] == ["the loaded module is the open one"]
    assert YAML(typ="safe").load(shape["yaml"]) == shape["spec"]


def _saved_fleet(tmp_path: Path) -> tuple[Path, Path]:
    raw = tmp_path / "raw"
    for host, capture in (
        ("gpu01", "h200-ubuntu2404-2026-12-01"),
        ("gpu02", "h200-ubuntu2404-spec"),
        ("gpu03", "h200x2-ubuntu2404-2026-12-01"),
    ):
        shutil.copytree(ROOT / "tests" / "fixtures" / "raw" / capture, raw / host)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[h200]\ngpu01\ngpu02\ngpu03\n")
    return inventory, raw


def test_an_inventory_imports_to_one_spec_per_shape_and_a_fleet_file_whose_plan_is_empty(
    tmp_path: Path,
) -> None:
    inventory, raw = _saved_fleet(tmp_path)
    out = tmp_path / "imported"
    result = invoke("import", "-i", str(inventory), "--from-raw", str(raw), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "fleet.yaml",
        "locks/gpu01.lock.json",
        "locks/gpu02.lock.json",
        "locks/gpu03.lock.json",
        "specs/h200-sxm-x1-ubuntu2404.yaml",
        "specs/h200-sxm-x2-ubuntu2404.yaml",
    ]
    fleet = load_fleet(None, out / "fleet.yaml")
    assert {h: p.name for h, p in fleet.specs.items()} == {
        "gpu01": "h200-sxm-x1-ubuntu2404.yaml",
        "gpu02": "h200-sxm-x1-ubuntu2404.yaml",
        "gpu03": "h200-sxm-x2-ubuntu2404.yaml",
    }
    planned = json.loads(
        invoke("plan", "--fleet", str(out / "fleet.yaml"), "--from-raw", str(raw), "--json").stdout
    )
    assert planned["summary"]["unchanged"] == ["gpu01", "gpu02", "gpu03"]


def test_a_host_that_cannot_be_imported_is_named_the_others_written_and_the_exit_is_1(tmp_path: Path) -> None:
    inventory, raw = _saved_fleet(tmp_path)
    inventory.write_text("[h200]\ngpu01\ngpu09\n")
    out = tmp_path / "imported"
    result = invoke("import", "-i", str(inventory), "--from-raw", str(raw), "--out", str(out))
    assert result.exit_code == 1
    assert f"gpu09: host unreachable: no saved outputs in {raw / 'gpu09'}" in result.stderr
    text = (out / "fleet.yaml").read_text()
    assert "`provision plan --fleet fleet.yaml -l '!gpu09'`" in text
    assert (out / "specs" / "h200-sxm-x1-ubuntu2404.yaml").exists()


def test_gpus_the_facts_cannot_name_are_given_with_the_option_and_checked_against_the_catalog() -> None:
    with pytest.raises(NotImportable, match="no NVIDIA GPU seen"):
        import_one(fresh_ubuntu(), CATALOG)
    settled = import_one(fresh_ubuntu(), CATALOG, Source(gpus=("a100x", 2)))
    assert settled.data["gpus"] == {"model": "a100x", "count": 2}
    assert settled.notes["gpus.model"] == [f"given with --gpus: the catalog's {CATALOG.gpus['a100x'].name}"]
    with pytest.raises(NotImportable, match="--gpus a100: not a GPU model of the catalog; did you mean"):
        import_one(fresh_ubuntu(), CATALOG, Source(gpus=("a100", 2)))
    with pytest.raises(NotImportable, match=r"give the count too, --gpus a100x:COUNT$"):
        import_one(fresh_ubuntu(), CATALOG, Source(gpus=("a100x", None)))
    assert invoke("import", "--gpus", "a100x:0").stderr.strip() == (
        "error: --gpus a100x:0: COUNT must be a whole number from 1 to 16"
    )


def test_import_names_the_a100x_from_its_lspci_id_alone(tmp_path: Path) -> None:
    """A fresh Rocky box with two A100X and no driver: no nvidia-smi name, only lspci's 10de:20b8,
    which the catalog takes from the PCI ID Repository (catalog gpus.yaml a100x pci)."""
    capture = Path(__file__).resolve().parents[1] / "fixtures" / "raw" / "rocky9-dual-a100x-fresh"
    out = tmp_path / "a100x.yaml"
    result = invoke("import", "--from-raw", str(capture), "--out", str(out))
    assert result.exit_code == 2, result.output  # written; a plan on it installs the missing stack
    gpus = YAML(typ="safe").load(out.read_text(encoding="utf-8"))["gpus"]
    assert (gpus["model"], gpus["count"]) == ("a100x", 2)
