"""The type stubs cover the whole API: every public name of the package, of its submodules and
of each class is in the .pyi files, and every name there exists."""

import ast
import inspect
import os
import unittest

import dcp


def stub_tree(module):
    folder = os.path.dirname(dcp.__file__)
    name = "__init__" if module is dcp else module.__name__.rsplit(".", 1)[1]
    with open(os.path.join(folder, name + ".pyi")) as f:
        return ast.parse(f.read())


def top_level_names(tree):
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, ast.ImportFrom) and node.module != "typing":
            for alias in node.names:
                names[alias.asname or alias.name] = node
    return names


def class_members(node, classes):
    """Names defined in a stub class body, its stub bases' included."""
    members = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            members.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members.add(item.target.id)
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            members |= class_members(classes[base.id], classes)
    return members


def runtime_members(cls):
    inherited = set(dir(Exception)) if issubclass(cls, BaseException) else set()
    return {n for n in vars(cls) if not n.startswith("_") and n not in inherited}


class StubTest(unittest.TestCase):
    def test_every_public_name_is_in_the_stubs_and_exists(self) -> None:
        stubs = top_level_names(stub_tree(dcp))
        public = set(dcp.__all__)
        self.assertEqual(public - set(stubs), set(), "in dcp.__all__ but not in __init__.pyi")
        extra = {n for n in stubs if not n.startswith("_") and n != "Batch"} - public
        self.assertEqual(extra, set(), "in __init__.pyi but not in dcp.__all__")
        undeclared = {n for n in dir(dcp) if not n.startswith("_") and not inspect.ismodule(getattr(dcp, n))
                      and n not in {"Optional", "Sequence", "Union"}} - public
        self.assertEqual(undeclared, set(), "public in dcp but missing from __all__")
        extension = {n for n in dir(dcp._dcp) if not n.startswith("_")} - {"models", "gpus"}
        self.assertEqual(extension - public, set(), "in the extension but not re-exported")

    def test_every_class_member_is_in_its_stub(self) -> None:
        stubs = top_level_names(stub_tree(dcp))
        classes = {n: node for n, node in stubs.items() if isinstance(node, ast.ClassDef)}
        for name in dcp.__all__:
            cls = getattr(dcp, name)
            if not inspect.isclass(cls):
                continue
            with self.subTest(name):
                self.assertIn(name, classes)
                members = class_members(classes[name], classes)
                runtime = runtime_members(cls)
                self.assertEqual(runtime - members, set(), f"{name}: members missing from the stub")
                stubbed = {m for m in members if not m.startswith("_")}
                self.assertEqual(stubbed - set(dir(cls)), set(), f"{name}: stub names that do not exist")

    def test_preset_modules(self) -> None:
        for module in (dcp.models, dcp.gpus):
            with self.subTest(module.__name__):
                stubs = {n for n in top_level_names(stub_tree(module)) if not n[0].isupper()}
                self.assertEqual(set(module.__all__), stubs)
                native = getattr(dcp._dcp, module.__name__.rsplit(".", 1)[1])
                self.assertEqual({n for n in dir(native) if not n.startswith("_")} - set(module.__all__), set())

    def test_every_public_name_has_a_docstring(self) -> None:
        for name in dcp.__all__:
            value = getattr(dcp, name)
            if inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value):
                with self.subTest(name):
                    self.assertTrue((value.__doc__ or "").strip(), f"{name} has no docstring")

    def test_py_typed_marker(self) -> None:
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(dcp.__file__), "py.typed")))


if __name__ == "__main__":
    unittest.main()
