"""The CLI as a user drives it: exit codes, one-line errors, JSON outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provision.cli import cli
from tests.unit.factories import one_host, one_plan

ROOT = Path(__file__).resolve().parents[2]
H200_SPEC = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
H200_RAW = str(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec")
H200_FULL_RAW = str(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01")
"""The later capture of the same machine, with every probe the planner's invariants read."""
A100X_SPEC = str(ROOT / "specs" / "dual-a100x.yaml")


@pytest.fixture(autouse=True)
def _no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")


def run(*args: str) -> object:
    return CliRunner().invoke(cli, list(args))


def test_validate_good_spec() -> None:
    result = run("validate", A100X_SPEC)
    assert result.exit_code == 0, result.output
    assert "valid" in result.output


def test_validate_reports_file_line_column_and_exits_2(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\nos:\n  distro: ubuntu\n  version: '24.04'\n  colour: blue\n")
    result = run("validate", str(spec))
    assert result.exit_code == 2
    assert f"{spec}:5:3: os.colour: unknown key" in result.output
    assert f"{spec}:1:1: gpus: Field required" in result.output
    assert "Traceback" not in result.output


def test_a_name_in_the_wrong_case_gets_the_rule_in_words_and_the_fix(tmp_path: Path) -> None:
    spec = tmp_path / "upper.yaml"
    spec.write_text(Path(A100X_SPEC).read_text().replace("model: a100x", "model: A100X"))
    result = run("validate", str(spec))
    assert result.exit_code == 2
    line = next(x for x in result.output.splitlines() if "gpus.model" in x)
    assert line.startswith(f"error: {spec}:") and "did you mean 'a100x'?" in line
    assert "pattern" not in result.output


def test_validate_refusal_names_rule_and_source_and_exits_1() -> None:
    result = run("validate", str(ROOT / "specs" / "examples" / "impossible-a100x.yaml"))
    assert result.exit_code == 1
    assert "[cuda-driver-floor]" in result.output
    assert "RN132" in result.output


def test_missing_spec_is_one_line(tmp_path: Path) -> None:
    result = run("plan", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {tmp_path / 'nope.yaml'}: no such spec file"


def test_schema_is_json_schema() -> None:
    result = run("schema")
    schema = json.loads(result.output)
    assert schema["title"] == "Spec"
    assert "driver" in schema["properties"]


def test_detect_from_raw_json_round_trips() -> None:
    result = run("detect", "--from-raw", H200_RAW, "--json", H200_SPEC)
    assert result.exit_code == 0, result.output
    facts = one_host(json.loads(result.output))
    assert facts["driver"] == {"version": "580.159.04", "flavor": "open"}
    assert facts["torch"]["version"] == "2.11.0+cu130"


def test_plan_from_real_h200_probes_has_no_changes() -> None:
    result = run("plan", H200_SPEC, "--from-raw", H200_FULL_RAW, "--detailed-exitcode")
    assert result.exit_code == 0, result.output
    assert "No changes. The machine matches the spec." in result.output


def test_plan_never_says_the_machine_matches_while_facts_were_unread() -> None:
    # The earlier real capture predates the binding, initramfs and loader-cache probes: nothing to
    # change, but those invariants cannot be confirmed, and the summary says so.
    result = run("plan", H200_SPEC, "--from-raw", H200_RAW, "--json")
    assert result.exit_code == 0, result.output
    doc = one_plan(json.loads(result.output))
    unconfirmed = [w["rule"] for w in doc["warnings"] if w["unconfirmed"]]
    assert unconfirmed and set(unconfirmed) == {"invariant-unconfirmed"}
    assert not [w for w in doc["warnings"] if not w["unconfirmed"]]
    assert {s["action"] for s in doc["steps"]} == {"noop"}
    assert doc["summary"] == (
        "No changes planned, but the machine is not confirmed to match the spec: "
        f"{len(unconfirmed)} warning(s) name facts that could not be read."
    )
    assert "matches the spec." not in run("plan", H200_SPEC, "--from-raw", H200_RAW).output


def test_a_plan_with_changes_also_says_what_it_could_not_read(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(Path(H200_SPEC).read_text().replace('nccl: "2.28.3"', 'nccl: "2.29.2"'))
    doc = one_plan(json.loads(run("plan", str(spec), "--from-raw", H200_RAW, "--json").output))
    unread = sum(1 for w in doc["warnings"] if w["unconfirmed"])
    # The NCCL upgrade and the repository it comes from.
    expected = f"Plan: 1 to configure, 1 to upgrade. {unread} warning(s) name facts that could not be read."
    assert unread and doc["summary"] == expected


def test_plan_detailed_exitcode_2_when_changes(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(run("detect", "--from-raw", H200_RAW, "--json").output)
    spec = tmp_path / "spec.yaml"
    spec.write_text(Path(H200_SPEC).read_text().replace('nccl: "2.28.3"', 'nccl: "2.29.2"'))
    result = run("plan", str(spec), "--facts", str(facts), "--detailed-exitcode", "--json")
    assert result.exit_code == 2, result.output
    plan = one_plan(json.loads(result.output))
    nccl = next(s for s in plan["steps"] if s["component"] == "nccl")
    assert nccl["action"] == "upgrade"
    assert nccl["packages"] == ["libnccl2=2.29.2-*+cuda13.0", "libnccl-dev=2.29.2-*+cuda13.0"]


def test_bad_facts_file_is_one_line(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"host": 3}')
    result = run("plan", H200_SPEC, "--facts", str(facts))
    assert result.exit_code == 1
    assert "not a provision facts file" in result.output


def test_a_plan_made_from_a_capture_names_the_capture_not_localhost(tmp_path: Path) -> None:
    saved = tmp_path / "plan.json"
    assert run("plan", H200_SPEC, "--from-raw", H200_RAW, "--out", str(saved)).exit_code == 0
    result = run("apply", str(saved), "--yes")  # this machine is not the H200
    assert result.exit_code == 1
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(
        "error: the plan was made from the facts of h200-ubuntu2404-spec, not of localhost (facts "
    )
    assert line.endswith("plan localhost itself with `provision plan` and apply that")
    assert "localhost changed" not in result.output


def test_apply_refusal_is_said_once() -> None:
    # This test machine is not the spec's Ubuntu 24.04 (CI and development run Debian 12).
    result = run("apply", A100X_SPEC)
    assert result.exit_code == 1
    assert "Refused: 1 blocker(s); nothing will be changed." in result.output
    assert result.output.count("[os-mismatch]") == 1 and "error:" not in result.output


def test_checklist_markdown_and_html(tmp_path: Path) -> None:
    md = run("checklist", A100X_SPEC)
    assert md.exit_code == 0, md.output
    assert "Above 4G" in md.output
    out = tmp_path / "c.html"
    html = run("checklist", A100X_SPEC, "--format", "html", "-o", str(out))
    assert html.exit_code == 0, html.output
    assert out.read_text().lstrip().lower().startswith("<!doctype html>")


def test_apply_json_reports_a_refusal_on_stdout() -> None:
    # Detects this machine: the CI and development machines run Debian 12, not the spec's Ubuntu.
    result = CliRunner().invoke(cli, ["apply", A100X_SPEC, "--dry-run", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["outcome"] == "refused"
    assert one_plan(report["plan"])["blockers"][0]["rule"] == "os-mismatch"


def test_detect_summary_names_every_fact() -> None:
    result = run("detect", "--from-raw", H200_RAW, H200_SPEC)
    assert result.exit_code == 0, result.output
    for line in (
        "580.159.04 (open kernel modules, loaded)",
        "0: NVIDIA H200, cc 9.0, 143771 MiB",
        "2.11.0+cu130 (CUDA 13.0) in /opt/torch/.venv",
        "unknown: lspci: not found",
        "not loaded",
    ):
        assert line in result.output, line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["plan", H200_SPEC, "--from-raw", H200_RAW, "--out", "/nonexistent-dir/p.json"],
            "error: --out /nonexistent-dir/p.json: directory /nonexistent-dir does not exist",
        ),
        (
            ["checklist", A100X_SPEC, "--format", "html", "-o", "/nonexistent-dir/c.html"],
            "error: --output /nonexistent-dir/c.html: directory /nonexistent-dir does not exist",
        ),
        (
            ["detect", "--save-raw", str(ROOT / "README.md")],
            f"error: --save-raw {ROOT / 'README.md'}: exists and is not a directory",
        ),
        (
            ["detect", "--save-raw", str(ROOT / "README.md" / "raw")],
            f"error: --save-raw {ROOT / 'README.md' / 'raw'}: {ROOT / 'README.md'} is not a directory",
        ),
        (
            ["plan", H200_SPEC, "--from-raw", H200_RAW, "--out", str(ROOT)],
            f"error: --out {ROOT}: is a directory; give a file name",
        ),
    ],
)
def test_unwritable_outputs_are_one_line_before_any_work(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 1
    assert result.output.strip() == message  # the plan or the facts were not printed first


def test_empty_raw_directory_and_bad_plan_file(tmp_path: Path) -> None:
    empty = run("detect", "--from-raw", str(tmp_path))
    assert empty.exit_code == 1 and "no probe outputs" in empty.output
    bad = tmp_path / "plan.json"
    bad.write_text("{}")
    result = run("apply", str(bad), "--dry-run")
    assert result.exit_code == 1
    assert "not a provision plan (spec: Field required; 3 more)" in result.output


def test_unreadable_inputs_are_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xd0\xff")
    garbled = tmp_path / "hosts.ini"
    garbled.write_text("[x\n")
    cases = [
        (["plan", H200_SPEC, "--facts", str(tmp_path)], "not a regular file (a directory)"),
        (["apply", str(binary), "--dry-run"], "not a provision plan file (not UTF-8 text)"),
        (["plan", "--fleet", str(binary)], "not a fleet file (not UTF-8 text)"),
        (["plan", H200_SPEC, "-i", str(tmp_path / "none.ini")], "no such inventory"),
        (["plan", H200_SPEC, "-i", str(garbled)], "no hosts"),
    ]
    for args, message in cases:
        result = run(*args)
        assert result.exit_code == 1, args
        assert message in result.output and "Traceback" not in result.output, (args, result.output)


def test_driver_version_must_be_a_full_nvidia_version(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(Path(A100X_SPEC).read_text().replace('version: "580.95.05"', 'version: "580.95"'))
    result = run("validate", str(spec))
    assert result.exit_code == 2
    line = next(x for x in Path(spec).read_text().splitlines() if 'version: "580.95"' in x)
    row = Path(spec).read_text().splitlines().index(line) + 1
    said = f"{spec}:{row}:3: driver.version: 580.95 is not a full driver version such as 580.95.05"
    assert said in result.output


def test_a_toolkit_or_a_driver_outside_its_branch_is_located_at_its_own_line(tmp_path: Path) -> None:
    text = Path(H200_SPEC).read_text()
    rows = text.splitlines()
    spec = tmp_path / "s.yaml"
    spec.write_text(text.replace('toolkit: "13.0"', 'toolkit: "13"'))
    row = next(n for n, x in enumerate(rows, 1) if "toolkit:" in x)
    assert (
        f"{spec}:{row}:3: cuda.toolkit: must be a release X.Y such as 13.0, not 13"
        in run("validate", str(spec)).output
    )
    spec.write_text(text.replace("  branch: 580\n", '  branch: 580\n  version: "570.86.10"\n'))
    row = next(n for n, x in enumerate(rows, 1) if "branch: 580" in x) + 1
    assert (
        f"{spec}:{row}:3: driver.version: 570.86.10 is not in branch 580" in run("validate", str(spec)).output
    )


def test_verify_save_raw_onto_a_file_is_one_line_before_any_work(tmp_path: Path) -> None:
    taken = tmp_path / "taken.yaml"
    taken.write_text("x\n")
    inputs = str(ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404-2026-12-01" / "inputs.json")
    result = run("verify", H200_SPEC, "--inputs", inputs, "--save-raw", str(taken))
    assert result.exit_code == 1
    assert result.output.strip() == f"error: --save-raw {taken}: exists and is not a directory"
    assert taken.read_text() == "x\n"
    as_json = run("verify", H200_SPEC, "--inputs", inputs, "--save-raw", str(taken), "--json")
    assert json.loads(as_json.stdout)["outcome"] == "error"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["plan", H200_SPEC, "--from-raw", H200_RAW, "--facts", "f.json"], "--facts and --from-raw are"),
        (["detect", "--from-raw", H200_RAW, "--save-raw", "out"], "--save-raw keeps what detection reads"),
        (["plan", H200_SPEC, "--from-raw", H200_RAW, "-l", "gpu1"], "--limit selects hosts of an inventory"),
    ],
)
def test_contradictory_sources_of_facts_are_refused_in_one_line(
    args: list[str], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {line}") and len(result.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_an_unknown_spec_key_says_which_key_was_meant(tmp_path: Path) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text(Path(A100X_SPEC).read_text().replace("  branch: 580", "  brnach: 580", 1))
    result = run("validate", str(spec))
    assert result.exit_code == 2
    assert (
        "driver.brnach: unknown key (not part of spec v1; see `provision schema`); did you mean 'branch'?"
        in (result.output)
    )


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("gpuz:\n", "gpus"),  # 'gpu' (optional, absent) is as close: the missing required key wins
        ("gpu:\n  persistence: true\ngpuz:\n", "gpus"),
        ("drivr:\n", "driver"),
    ],
)
def test_a_misspelt_required_key_is_named_before_an_optional_one(
    written: str, meant: str, tmp_path: Path
) -> None:
    spec = tmp_path / "typo.yaml"
    old = "gpus:\n" if meant == "gpus" else "driver:\n"
    spec.write_text(Path(A100X_SPEC).read_text().replace(old, written, 1))
    result = run("validate", str(spec))
    wrong = written.splitlines()[-1].rstrip(":")
    assert result.exit_code == 2
    assert f"{wrong}: unknown key (not part of spec v1; see `provision schema`); did you mean {meant!r}?" in (
        result.output
    )


def test_an_unknown_key_is_not_taken_for_a_key_its_mapping_already_has(tmp_path: Path) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text(Path(A100X_SPEC).read_text().replace("  count: 2\n", "  count: 2\n  counts: 2\n", 1))
    result = run("validate", str(spec))
    assert result.exit_code == 2
    assert "gpus.counts: unknown key (not part of spec v1; see `provision schema`)\n" in result.output


@pytest.mark.parametrize(
    ("line", "written", "field"),
    [
        ('  version: "24.04"', "  version: 24.04", "os.version"),
        ('  toolkit: "13.0"', "  toolkit: 13.10", "cuda.toolkit"),
        ('  interpreter: "3.12"', "  interpreter: 3.10", "python.interpreter"),
    ],
)
def test_a_value_yaml_reads_as_a_number_says_to_quote_it_as_written(
    line: str, written: str, field: str, tmp_path: Path
) -> None:
    spec = tmp_path / "unquoted.yaml"
    text = Path(A100X_SPEC).read_text()
    assert line in text
    spec.write_text(text.replace(line, written, 1))
    result = run("validate", str(spec))
    assert result.exit_code == 2
    token = written.split(": ")[1]
    said = f'{field}: write it in quotes, "{token}": YAML reads an unquoted {token} as a number'
    assert said in result.output and len(result.output.splitlines()) == 1, result.output


def _with_absent_venv(raw: Path) -> Path:
    """The H200 probes capture, plus the venv probe's output for a spec venv that does not exist."""
    import shutil

    shutil.copytree(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-probes", raw)
    venv = "/opt/torch/.venv"
    (raw / "venv.txt").write_text(
        f"$ sh -c '<venv script>' sh {venv}\npath {venv}\ncat: {venv}/pyvenv.cfg: No such file or directory\n"
        "[exit 1]\n"
    )
    return raw


@pytest.mark.parametrize(
    ("spec", "raw", "said"),
    [
        (A100X_SPEC, H200_RAW, "Saved the refused plan to {out} for review: `provision apply` refuses it"),
        (H200_SPEC, H200_RAW, "Saved the plan to {out}: it changes nothing"),
        (H200_SPEC, "", "Saved the plan to {out}; run `provision apply {out}` to apply exactly this plan."),
    ],
)
def test_plan_out_says_what_the_saved_plan_is_for(spec: str, raw: str, said: str, tmp_path: Path) -> None:
    if not raw:  # the H200 capture with its venv observed absent: a plan that creates it
        raw = str(_with_absent_venv(tmp_path / "raw"))
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(cli, ["plan", spec, "--from-raw", raw, "--out", str(out)])
    assert out.is_file(), result.output
    assert said.format(out=out) in " ".join(result.stderr.split()), result.stderr


def test_a_file_the_user_cannot_read_is_one_line_exit_1_and_one_json_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # click's Path checks readability itself unless told not to: a usage error, exit 2 (what
    # --detailed-exitcode means by "changes pending") and no JSON. provision reads every file itself.
    import os

    spec = tmp_path / "unreadable.yaml"
    spec.write_text(Path(H200_SPEC).read_text())
    real_open = os.open

    def denied(path: object, *args: object, **kwargs: object) -> int:
        if str(path) in (str(spec), spec.name):  # the reader opens it by name in its directory
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # as for a user who may read nothing
    monkeypatch.setattr("provision.files.os.open", denied)
    result = CliRunner().invoke(
        cli, ["plan", str(spec), "--from-raw", H200_RAW, "--json", "--detailed-exitcode"]
    )
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error["message"] == f"{spec}: cannot read the spec file: Permission denied"


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "{spec}"],
        ["plan", "{spec}", "--facts", "{file}"],
        ["plan", "{spec}", "--from-raw", "{dir}"],
        ["plan", "{spec}", "-i", "{file}", "--out", "{out}"],
        ["plan", "--fleet", "{file}"],
        ["detect", "{spec}", "--from-raw", "{dir}", "--save-raw", "{out}"],
        ["apply", "{file}", "--dry-run", "--runs-dir", "{dir}"],
        ["resume", "{file}"],
        ["checklist", "{spec}", "--facts", "{file}", "-o", "{out}"],
        ["verify", "--inputs", "{file}", "--junit", "{out}", "--save-raw", "{dir}", "--prometheus", "{out}"],
    ],
)
def test_no_path_option_is_refused_by_the_option_parser_as_unreadable(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    (tmp_path / "raw").mkdir()
    (tmp_path / "f.json").write_text("{}")
    names = {"spec": H200_SPEC, "file": str(tmp_path / "f.json"), "dir": str(tmp_path / "raw")}
    names["out"] = str(tmp_path / "out")
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    result = CliRunner().invoke(cli, [a.format(**names) for a in args])
    assert "not readable" not in result.output
    assert result.exit_code != 2, result.output


def test_validate_refuses_what_the_checklist_would_refuse_in_bios_located(tmp_path: Path) -> None:
    spec = tmp_path / "bios.yaml"
    item = "{id: x-one, title: T, why: W, how: H}"
    bios = f"bios:\n  items:\n    - {item}\n    - {item}\n  skip: [x-one, secure-bot]\n"
    spec.write_text(Path(H200_SPEC).read_text() + bios)
    lines = Path(spec).read_text().splitlines()
    result = run("validate", str(spec))
    assert result.exit_code == 2, result.output
    assert f"{spec}:{len(lines) - 1}:8: bios.items.1.id: duplicate checklist item id 'x-one'" in result.output
    skip = f"{spec}:{len(lines)}:17: bios.skip.1: unknown checklist item id 'secure-bot'"
    assert f"{skip}; did you mean 'secure-boot'?\n" in result.output
    checklist = run("checklist", str(spec))  # refuses the same spec, in the same located lines
    assert checklist.exit_code == 1 and f"{skip}; did you mean 'secure-boot'?\n" in checklist.output
    spec.write_text(
        Path(H200_SPEC).read_text() + "bios:\n  skip: [x-one, secure-boot]\n  items:\n    - " + item + "\n"
    )
    assert run("validate", str(spec)).exit_code == 0  # an id bios.items adds may be skipped


def test_checklist_refuses_two_sources_of_facts_as_plan_does(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text("{}")
    for command in ("checklist", "plan"):
        result = run(command, H200_SPEC, "--from-raw", H200_RAW, "--facts", str(facts))
        assert result.exit_code == 1, result.output
        assert "--facts and --from-raw are different sources of facts: give one" in result.output


@pytest.mark.parametrize(
    ("option", "line"),
    [
        (["--format", "docx"], "error: --format docx: choose md, html or pdf\n"),
        (["--paper", "a3"], "error: --paper a3: choose a4 or letter\n"),
    ],
)
def test_a_checklist_value_out_of_its_choices_names_that_option_alone(
    option: list[str], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("checklist", A100X_SPEC, *option)
    assert result.exit_code == 1
    assert result.output == line
    assert list(tmp_path.iterdir()) == []
