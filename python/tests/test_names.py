# SPDX-License-Identifier: MIT
# Names of styles, scaling types, multimodal kinds, layouts and dtypes: the library's lists, read
# with underscores (canonical) or hyphens in any case, the same value either way; unknown names
# are InvalidArgument listing the canonical ones. Error statuses and codes come from the
# library's status list.
import ast
import pathlib

import numpy as np
import pytest

import posenc
from posenc import _posenc, hf

KINDS = ("rope_style", "rope_scaling_type", "rope_multimodal", "sinusoidal_layout", "dtype")


def test_names_are_the_library_lists():
    assert set(posenc.NAMES) == set(KINDS)
    assert posenc.NAMES["rope_style"] == ("neox", "gptj")
    assert posenc.NAMES["rope_scaling_type"][7] == "yarn_ggml"
    assert posenc.NAMES["rope_multimodal"][5] == "positions_map"
    assert posenc.NAMES["sinusoidal_layout"] == ("interleaved", "sin_cos", "cos_sin")
    assert posenc.NAMES["dtype"][1:4] == ("f32", "f16", "bf16")
    assert hf.SCALING_TYPES == posenc.NAMES["rope_scaling_type"]
    for names in posenc.NAMES.values():
        for name in names:
            assert name == name.lower() and "-" not in name


@pytest.mark.parametrize("kind", KINDS)
def test_every_spelling_round_trips(kind):
    for value, name in enumerate(posenc.NAMES[kind]):
        for spelling in (name, name.replace("_", "-"), name.upper(),
                         name.upper().replace("_", "-")):
            assert _posenc.name_value(kind, spelling, "x") == value
            assert _posenc.canonical_name(kind, spelling) == name
        assert _posenc.name_value(kind, value, "x") == value


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_names_are_refused(kind):
    names = posenc.NAMES[kind]
    for bad in ("", "unknown", names[0] + "_", " " + names[0]):
        with pytest.raises(posenc.InvalidArgument) as info:
            _posenc.name_value(kind, bad, "what")
        message = str(info.value)
        assert message.startswith("what: ")
        assert ", ".join(names) in message
        assert _posenc.canonical_name(kind, bad) is None
    for bad in (-1, len(names)):
        with pytest.raises(posenc.InvalidArgument, match="what"):
            _posenc.name_value(kind, bad, "what")


def _stub_literals(node):
    """The strings of every Literal[...] under `node` of the type stub."""
    return {leaf.value for sub in ast.walk(node)
            if isinstance(sub, ast.Subscript) and getattr(sub.value, "id", None) == "Literal"
            for leaf in ast.walk(sub.slice)
            if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str)}


def test_type_stub_spells_the_library_lists():
    # The stub writes the names out for type checkers; they must be the library's own, each
    # accepted, and none missing.
    stub = ast.parse(pathlib.Path(posenc.__file__).with_suffix(".pyi").read_text())
    aliases = {target.id: statement.value for statement in stub.body
               if isinstance(statement, ast.Assign) for target in statement.targets}
    sinusoidal = next(statement for statement in stub.body
                      if isinstance(statement, ast.FunctionDef) and statement.name == "sinusoidal")
    layout = next(argument for argument in sinusoidal.args.kwonlyargs if argument.arg == "layout")
    for kind, node in (("rope_style", aliases["_Style"]),
                       ("rope_multimodal", aliases["_Multimodal"]),
                       ("sinusoidal_layout", layout.annotation)):
        spelled = _stub_literals(node)
        assert set(posenc.NAMES[kind]) <= spelled, kind
        for name in spelled:
            assert _posenc.canonical_name(kind, name) is not None, (kind, name)


def test_older_multimodal_spellings():
    assert _posenc.name_value("rope_multimodal", "1d", "x") == 0
    assert _posenc.name_value("rope_multimodal", "vision_2d_pixtral", "x") == 4
    assert _posenc.canonical_name("rope_multimodal", "vision-2d-pixtral") == "pixtral"


def _rotated(**options):
    q = np.arange(4 * 2 * 16, dtype=np.float32).reshape(4, 2, 16) / 100
    return posenc.rope(q, theta=100.0, **options)


@pytest.mark.parametrize("first, second", [
    ({"style": "gptj"}, {"style": "GPTJ"}),
    ({"scaling": {"type": "yarn_ggml", "freq_scale": 0.25, "ext_factor": 1.0,
                  "original_max_positions": 2}},
     {"scaling": {"type": "yarn-ggml", "freq_scale": 0.25, "ext_factor": 1.0,
                  "original_max_positions": 2}}),
    ({"scaling": {"type": "dynamic_ntk", "factor": 2.0, "original_max_positions": 2}},
     {"scaling": {"type": "Dynamic-NTK", "factor": 2.0, "original_max_positions": 2}}),
    ({"multimodal": "positions_map", "components": 1, "component_map": [0] * 8},
     {"multimodal": "positions-map", "components": 1, "component_map": [0] * 8}),
])
def test_rope_spellings_agree(first, second):
    np.testing.assert_array_equal(_rotated(**first), _rotated(**second))


def test_rope_unknown_names():
    q = np.zeros((4, 2, 16), np.float32)
    with pytest.raises(posenc.InvalidArgument, match="style: 'llama' is not one of neox, gptj"):
        posenc.rope(q, style="llama")
    with pytest.raises(posenc.InvalidArgument, match="multimodal: .*positions_map"):
        posenc.rope(q, multimodal="vision")


def test_sinusoidal_spellings_agree():
    a = posenc.sinusoidal(rows=4, d_model=8, layout="cos_sin")
    b = posenc.sinusoidal(rows=4, d_model=8, layout="COS-SIN")
    np.testing.assert_array_equal(a, b)
    assert posenc.sinusoidal(rows=4, d_model=8, dtype="F16").dtype == np.float16


def test_python_errors_carry_the_library_codes():
    codes = {"INVALID_ARGUMENT": -100, "INVALID_SHAPE": -101, "INVALID_DTYPE": -102}
    for status, code in codes.items():
        error = posenc._error(status, "message")
        assert error.status == "POSENC_" + status
        assert error.code == code
        assert str(error) == "message"
    assert isinstance(posenc._error("INVALID_DTYPE", "m"), posenc.InvalidDtype)
    with pytest.raises(ValueError):
        posenc._error("NO_SUCH_STATUS", "m")
