"""grader.jsonio: what it reads is what json reads; what it writes, json reads back the same."""

import json

import pytest

from grader import jsonio

TEXTS = [
    '{"a": 1, "a": 2}', "[1e400]", "[-0.0]", "[NaN, Infinity, -Infinity]", "[18446744073709551616]",
    "[-9223372036854775809]", "[9223372036854775807, -9223372036854775808]", '["\\ud800"]', "[1.5e-320]",
    '{"x": "\\u0000"}', "  [1] ", '{"é": "ü—"}', "[0.1, 2.5e10, 123456789012345678]", "[" * 500 + "]" * 500,
    "[1] x", "{", "",
]


def _read(read, data):
    try:
        return repr(read(data))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__


@pytest.mark.parametrize("text", TEXTS)
def test_loads_reads_what_json_reads(text):
    """Big integers stay integers, NaN and lone surrogates are read, bad JSON raises json's error."""
    for data in (text, text.encode("utf-8", "surrogatepass")):
        assert _read(jsonio.loads, data) == _read(json.loads, data)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 3000 + "1" + "}" * 3000,
                                  "[" * 3000 + "NaN" + "]" * 3000])
def test_text_nested_too_deeply_is_a_decode_error_not_a_recursion_error(text):
    """json raises RecursionError for it: a submission or a child could throw it through the grader."""
    with pytest.raises(RecursionError):
        json.loads(text)
    for data in (text, text.encode()):
        with pytest.raises(json.JSONDecodeError, match=jsonio.TOO_DEEP):
            jsonio.loads(data)


@pytest.mark.parametrize("indent", [False, True])
def test_dumps_writes_what_json_reads_back(indent):
    value = {"b": [1, 2.5, None, True, "é—", {"c": {}}], "a": 2**70, "s": "\ud800", "n": -(2**63)}
    for obj in (value, {k: v for k, v in value.items() if k not in ("a", "s")}):
        out = jsonio.dumps(obj, sort_keys=True, indent=indent)
        assert json.loads(out) == obj
        assert list(json.loads(out)) == sorted(obj)
        assert (b"\n  " in out) == indent
