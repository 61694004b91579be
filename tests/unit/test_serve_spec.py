"""The serve: section end to end without a machine: spec rules (vLLM's torch pin, CUDA build, driver
floor, Python range, tensor parallelism, memory fit), config.json read at load (and garbage refused in
one line), the systemd unit checked by systemd-analyze, and a second plan with nothing to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provision.catalog import load_catalog
from provision.catalog.serving import load_serving
from provision.components.base import Action, Component
from provision.components.serve import server_config
from provision.detect.domains.service import UnitFile
from provision.detect.facts import Venv
from provision.errors import SpecError
from provision.plan.planner import make_plan
from provision.plan.validate import validate_spec
from provision.serving.arch import ModelArchitecture
from provision.serving.modelconfig import parse_config_json
from provision.serving.unit import exec_start, systemd_quote, unit_text
from provision.spec.loader import load_spec
from provision.spec.models import Spec
from tests.unit.factories import fresh_ubuntu, spec_from, systemd_analyze_verify

ROOT = Path(__file__).resolve().parents[2]
SERVE_SPEC = ROOT / "specs" / "h200-serve-llama8b.yaml"
CONFIGS = ROOT / "tests" / "fixtures" / "serve" / "configs"
CATALOG = load_catalog()
DATA = load_serving()


def spec_with(**changes: Any) -> Spec:
    """The shipped serve spec with ``section__field=value`` changes."""
    return spec_from(SERVE_SPEC, **changes)


def rules(spec: Spec) -> dict[str, str]:
    return {f.rule: f.message for f in validate_spec(spec, CATALOG) if f.severity == "blocker"}


def test_shipped_serve_spec_is_valid() -> None:
    assert rules(load_spec(SERVE_SPEC)) == {}


def test_torch_pin_of_vllm_must_equal_python_torch() -> None:
    found = rules(spec_with(serve__vllm="0.27.0"))
    assert "serve-vllm-torch-pin" in found
    assert (
        "vLLM 0.27.0 requires torch==2.13.0, the spec's python.torch is 2.11.0"
        in found["serve-vllm-torch-pin"]
    )
    assert "0.26.0" in found["serve-vllm-torch-pin"]  # names the releases that pin 2.11.0


def test_cuda_build_and_driver_floor_follow_vllms_variant() -> None:
    found = rules(spec_with(python__cuda_variant="cu128", driver__branch=570))
    assert "built for cu130" in found["serve-vllm-cuda-variant"]
    assert "needs driver branch >= 580; driver.branch is 570" in found["serve-vllm-driver-floor"]


def test_python_outside_requires_python_is_refused() -> None:
    found = rules(spec_with(serve__vllm="0.32.0", python__torch="2.13.0", python__interpreter="3.10"))
    assert "requires Python >=3.11,<3.15" in found["serve-vllm-python"]


def test_unknown_vllm_and_missing_python_are_refused() -> None:
    assert "serve-vllm-unknown" in rules(spec_with(serve__vllm="0.1.0"))
    data = load_spec(SERVE_SPEC).model_dump(mode="json", exclude_none=True)
    del data["python"]
    assert "serve-needs-python" in rules(Spec.model_validate(data))


def test_tensor_parallel_beyond_the_gpus_or_across_heads_is_refused() -> None:
    assert "serve-tp-gpus" in rules(spec_with(serve__tensor_parallel_size=2))
    found = rules(spec_with(gpus__count=3))  # TP defaults to the GPU count; 32 heads do not divide by 3
    assert found["serve-tp-heads"].endswith("sizes it accepts on 3 GPUs: 1, 2")


def test_a_model_that_does_not_fit_is_refused_with_the_arithmetic_and_what_fits() -> None:
    found = rules(spec_with(serve__max_context=131072, serve__sequences=16))
    message = found["serve-memory-fit"]
    assert "KV cache: 131,072 B x 131,072 tokens x 16 sequence(s) = 256.0 GiB per GPU" in message
    assert "would fit: serve.kv_cache_dtype" not in message or "serve.max_context" in message
    assert "serve.max_context:" in message and "serve.sequences:" in message


def test_the_plan_refuses_what_validate_refuses() -> None:
    plan = make_plan(spec_with(serve__vllm="0.27.0"), fresh_ubuntu(), CATALOG)
    assert "serve-vllm-torch-pin" in {b.rule for b in plan.blockers}


def test_context_longer_than_the_model_is_refused() -> None:
    assert "serve-context-too-long" in rules(spec_with(serve__max_context=262144))


def test_plan_shows_the_arithmetic_then_nothing_to_do_once_installed_and_written() -> None:
    spec = load_spec(SERVE_SPEC)
    plan = make_plan(spec, fresh_ubuntu(), CATALOG)
    serve = [s for s in plan.steps if s.component is Component.SERVE]
    assert serve[0].action is Action.NOOP and serve[0].reason.startswith("memory fit: weights (bf16)")
    assert [s.action for s in serve[1:]] == [Action.INSTALL, Action.CONFIGURE]
    assert plan.role_vars("vllm_serve")["vllm_serve_constraints"] == ["torch==2.11.0+cu130"]
    assert spec.python is not None and spec.serve is not None
    done = fresh_ubuntu(
        venv=Venv(path=spec.python.venv, python="3.12.3", distributions={"vllm": "0.26.0"}),
        vllm_unit=UnitFile(present=True, text=unit_text(server_config(spec, spec.serve), DATA)),
    )
    again = [s for s in make_plan(spec, done, CATALOG).steps if s.component is Component.SERVE]
    assert [s.action for s in again] == [Action.NOOP] * 3
    assert "vllm 0.26.0 is installed in the venv" in again[1].reason


# ---- config.json ----------------------------------------------------------------------------------


def _spec_file(tmp_path: Path, serve: str) -> Path:
    text = SERVE_SPEC.read_text().split("\nserve:\n")[0] + "\nserve:\n" + serve
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_local_model_directory_is_read_from_its_config_json(tmp_path: Path) -> None:
    model = tmp_path / "llama"
    model.mkdir()
    shutil.copy(CONFIGS / "llama-3.1-70b.json", model / "config.json")
    spec = load_spec(_spec_file(tmp_path, f'  model: {model}\n  vllm: "0.26.0"\n  max_context: 8192\n'))
    assert spec.serve is not None and spec.serve.architecture is not None
    assert spec.serve.architecture.layers == 80 and spec.serve.architecture.source == f"{model}/config.json"
    found = rules(spec)  # 70B bf16 on one H200 (141 GiB): 131.4 GiB of weights do not leave room
    assert "serve-memory-fit" in found and "serve.weights: fp8" in found["serve-memory-fit"]
    assert Spec.model_validate_json(spec.model_dump_json()) == spec  # the plan's copy round-trips


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"num_hidden_layers": true, "num_attention_heads": 32}', "no integer num_hidden_layers"),
        (
            '{"num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 4, "head_dim": 8,'
            ' "max_position_embeddings": 64, "hidden_size": 48}',
            "not a multiple of kv_heads",
        ),
        ('{"kv_lora_rank": 512}', "multi-head latent attention"),
    ],
)
def test_a_bad_config_json_is_one_located_line(tmp_path: Path, content: str, why: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(content)
    path = _spec_file(tmp_path, f'  model: {tmp_path}\n  vllm: "0.26.0"\n')
    with pytest.raises(SpecError) as err:
        load_spec(path)
    (line,) = err.value.problems
    assert line.startswith(f"{path}:") and ": serve.model: " in line and why in line, line


def test_a_hub_id_without_figures_is_refused() -> None:
    data = load_spec(SERVE_SPEC).model_dump(mode="json", exclude_none=True)
    del data["serve"]["architecture"]
    with pytest.raises(ValueError, match="a Hub model id needs its figures"):
        Spec.model_validate(data)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=20,
)
_KEYS = [
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "max_position_embeddings",
    "intermediate_size",
    "vocab_size",
    "num_local_experts",
    "text_config",
]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _JSON | st.integers(-3, 10**7), max_size=10))
def test_config_parser_never_raises_on_near_configs(config: dict[str, Any]) -> None:
    result = parse_config_json(json.dumps(config), "x")
    assert isinstance(result, (ModelArchitecture, str))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_config_parser_never_raises_on_text(text: str) -> None:
    assert isinstance(parse_config_json(text, "x"), (ModelArchitecture, str))


def test_config_parser_refuses_deep_nesting_and_huge_files() -> None:
    assert "not JSON" in str(parse_config_json("[" * 100_000 + "]" * 100_000, "x"))
    assert "larger than" in str(parse_config_json(" " * (2 << 20), "x"))


# ---- the unit file --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "quoted"),
    [
        ("/opt/v/bin/vllm", "/opt/v/bin/vllm"),
        ("two words", '"two words"'),
        ("$HOME", '"$$HOME"'),
        ("100%", '"100%%"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("", '""'),
    ],
)
def test_systemd_quoting(arg: str, quoted: str) -> None:
    assert systemd_quote(arg) == quoted


def test_control_characters_are_refused_not_escaped() -> None:
    with pytest.raises(ValueError, match="control character"):
        exec_start(("/bin/true", "a\nExecStartPre=/bin/sh"))


def test_spec_values_cannot_reach_the_unit_as_syntax() -> None:
    for bad in ("/srv/m\nExecStartPre=/bin/sh", "/srv/m;rm", "owner/na me", "{{ lookup('pipe','id') }}"):
        with pytest.raises(ValueError):
            spec_with(serve__model=bad)
    spec = load_spec(SERVE_SPEC)
    assert spec.serve is not None and "{" not in unit_text(server_config(spec, spec.serve), DATA)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_rendered_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    venv = tmp_path / "opt" / "v w"  # a space, so that the quoting is exercised too
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").write_text("#!/bin/sh\n")
    (venv / "bin" / "vllm").chmod(0o755)
    spec = load_spec(SERVE_SPEC)
    assert spec.python is not None and spec.serve is not None
    spec = spec.model_copy(update={"python": spec.python.model_copy(update={"venv": str(venv)})})
    unit = tmp_path / "provision-vllm.service"
    unit.write_text(unit_text(server_config(spec, spec.serve), DATA))
    done = systemd_analyze_verify(unit)
    assert done.returncode == 0, done.stderr
    assert f'ExecStart="{venv}/bin/vllm" serve meta-llama/Llama-3.1-8B-Instruct' in unit.read_text()


def test_catalog_lists_vllm_releases_with_their_torch_pins() -> None:
    from provision.catalog.listing import listing

    rows = {r["release"]: r for r in listing(CATALOG, ("vllm",))["vllm"]["rows"]}
    assert rows["0.26.0"]["torch"] == "2.11.0" and rows["0.27.0"]["torch"] == "2.13.0"
    assert rows["0.33.0"]["torch"] == "2.14.0" and rows["0.32.0"]["python"] == ">=3.11,<3.15"
    assert all(r["source"] for r in rows.values())


@pytest.mark.parametrize(
    ("have", "action"),
    [("0.25.0", Action.UPGRADE), ("0.27.0", Action.DOWNGRADE), ("garbage", Action.INSTALL)],
)
def test_another_vllm_in_the_venv_is_replaced(have: str, action: Action) -> None:
    spec = load_spec(SERVE_SPEC)
    assert spec.python is not None
    facts = fresh_ubuntu(venv=Venv(path=spec.python.venv, python="3.12.3", distributions={"vllm": have}))
    wheel = [s for s in make_plan(spec, facts, CATALOG).steps if s.component is Component.SERVE][1]
    assert wheel.action is action and wheel.packages == ("vllm==0.26.0",)
