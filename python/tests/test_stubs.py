"""The type stubs (``sift_lsm/_native.pyi``) describe the compiled module as it is: every
public name, every method and property, and each callable's parameters, names and order."""

import ast
import inspect
from pathlib import Path

import sift_lsm
from sift_lsm import _native

STUB = Path(sift_lsm.__file__).with_name("_native.pyi")
DUNDERS_CHECKED = {"__contains__", "__enter__", "__exit__", "__iter__", "__next__", "__length_hint__"}


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_parameters(function: ast.FunctionDef):
    arguments = function.args
    positional = [a.arg for a in arguments.posonlyargs + arguments.args]
    return (
        [name for name in positional if name != "self"],
        [a.arg for a in arguments.kwonlyargs],
    )


def runtime_parameters(callable_):
    signature = inspect.signature(callable_)
    positional = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "$self")
    ]
    keyword = [p.name for p in signature.parameters.values() if p.kind == p.KEYWORD_ONLY]
    return positional, keyword


def test_every_public_name_is_in_the_stub_and_packaged():
    tree = stub_tree()
    stubbed = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    runtime = {name for name in dir(_native) if not name.startswith("_")}
    assert runtime - stubbed == set(), "public names missing from the stub"
    assert stubbed - runtime == set(), "stubbed names the module does not have"
    assert (Path(sift_lsm.__file__).with_name("py.typed")).exists()
    assert set(sift_lsm.__all__) >= runtime


def test_every_method_and_property_matches_its_stub():
    tree = stub_tree()
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or not hasattr(getattr(_native, node.name), "__dict__"):
            continue
        cls = getattr(_native, node.name)
        if issubclass(cls, BaseException):
            continue
        stubbed = {}
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                stubbed.setdefault(item.name, item)
        runtime = {
            name
            for name in vars(cls)
            if (not name.startswith("_") or name in DUNDERS_CHECKED)
        }
        assert runtime == set(stubbed), f"{node.name}: runtime {sorted(runtime)} stub {sorted(stubbed)}"
        for name, function in stubbed.items():
            member = vars(cls)[name]
            if isinstance(member, property) or type(member).__name__ == "getset_descriptor":
                assert any(
                    isinstance(d, ast.Name) and d.id == "property" for d in function.decorator_list
                ), f"{node.name}.{name} is a property"
                continue
            if name == "__exit__":
                continue  # (*args) at runtime, spelled out in the stub
            assert runtime_parameters(getattr(cls, name)) == stub_parameters(function), f"{node.name}.{name}"


def test_module_functions_match_their_stubs():
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            assert runtime_parameters(getattr(_native, node.name)) == stub_parameters(node), node.name


def test_every_public_callable_has_a_docstring():
    for name in dir(_native):
        if name.startswith("_"):
            continue
        value = getattr(_native, name)
        assert value.__doc__, name
        if inspect.isclass(value) and not issubclass(value, BaseException):
            for member_name, member in vars(value).items():
                if not member_name.startswith("_"):
                    assert member.__doc__, f"{name}.{member_name}"
