#!/usr/bin/env python3
"""packaging:spack-recipe: packaging/spack/hpclaunch/package.py, without Spack.

    spack_recipe_test.py SOURCE_DIR

Spack itself cannot be fetched here (not on PyPI or in Debian; GitHub unreachable), so `spack
spec` and `spack install` do not run (docs/install.md says how to run them). What runs: the recipe
is imported against a stub of `spack.package` that records Spack's directives, and checked
against the project itself:
- variants +trainer and +cuda (cuda only with +trainer);
- a dependency for every find_package() of the project's CMake files (CLI11 -> cli11, ...), and
  LibTorch (py-torch) only with +trainer;
- every -D the recipe passes is a cache variable or option of the project's CMake files, and
  HPC_BUILD_TRAINER follows the variant.
"""
import pathlib
import re
import sys
import types

source = pathlib.Path(sys.argv[1])
recipe = source / "packaging/spack/hpclaunch/package.py"
directives = {"variant": [], "depends_on": [], "version": [], "resource": []}


def directive(name):
    def record(*args, **kwargs):
        directives[name].append((args, kwargs))
    return record


class Spec:
    def __init__(self, variants):
        self.variants, self.version = variants, "main"

    def satisfies(self, constraint):
        return all(v in self.variants for v in re.findall(r"[+~]\w+", constraint))


class CMakePackage:
    run_tests = False

    def __init__(self, spec):
        self.spec = spec
        self.stage = types.SimpleNamespace(source_path="/stage/src")

    def define(self, name, value):
        if isinstance(value, bool):
            value = "ON" if value else "OFF"
        return f"-D{name}={value}"

    def define_from_variant(self, name, variant):
        return self.define(name, self.spec.satisfies("+" + variant))


stub = types.ModuleType("spack.package")
for name in directives:
    setattr(stub, name, directive(name))
stub.CMakePackage = CMakePackage
stub.maintainers = stub.license = lambda *a, **k: None
stub.run_after = stub.run_before = lambda *a, **k: (lambda f: f)
stub.on_package_attributes = lambda **k: (lambda f: f)
stub.join_path = lambda *parts: "/".join(parts)
stub.mkdirp = stub.copy = stub.Executable = lambda *a, **k: None
sys.modules["spack"] = types.ModuleType("spack")
sys.modules["spack.package"] = stub
namespace = {}
exec(compile(recipe.read_text(), str(recipe), "exec"), namespace)
package = namespace["Hpclaunch"]
failures = []

# Variants.
variants = {args[0]: kwargs for args, kwargs in directives["variant"]}
if set(variants) != {"trainer", "cuda"}:
    failures.append(f"variants {sorted(variants)}, expected trainer and cuda")
elif variants["cuda"].get("when") != "+trainer":
    failures.append("variant cuda should exist only with +trainer")

# Dependencies against the project's find_package() calls.
spack_name = {"CLI11": "cli11", "nlohmann_json": "nlohmann-json", "fmt": "fmt",
              "libssh": "libssh", "OpenSSL": "openssl", "Catch2": "catch2", "Torch": "py-torch",
              "Threads": None, "PkgConfig": "pkgconfig"}
cmake_text = "\n".join(p.read_text() for p in source.rglob("CMakeLists.txt")
                       if "build" not in p.relative_to(source).parts[0])
found = set(re.findall(r"find_package\((\w+)", cmake_text))
deps = {}
for args, kwargs in directives["depends_on"]:
    deps.setdefault(re.split(r"[@+~ ]", args[0])[0], []).append(kwargs.get("when", ""))
for cmake_name in sorted(found):
    if cmake_name not in spack_name:
        failures.append(f"find_package({cmake_name}) has no Spack name in this test: add it")
    elif spack_name[cmake_name] and spack_name[cmake_name] not in deps:
        failures.append(f"find_package({cmake_name}): no depends_on('{spack_name[cmake_name]}')")
if any(when in ("", None) or "+trainer" not in when for when in deps.get("py-torch", [])):
    failures.append("py-torch must be a dependency only with +trainer")

# The -D flags exist in the project and follow the variants.
cache_vars = set(re.findall(r"option\((\w+)", cmake_text))
cache_vars |= set(re.findall(r"set\((\w+) [^)]*CACHE", cmake_text, re.S))
cache_vars |= {"CMAKE_CXX_FLAGS", "CMAKE_PREFIX_PATH"}
for variant_set, trainer in (({"~trainer"}, "OFF"), ({"+trainer", "+cuda"}, "ON")):
    args = package(Spec(variant_set)).cmake_args()
    for arg in args:
        name = re.match(r"-D(\w+)=", arg).group(1)
        if name not in cache_vars:
            failures.append(f"cmake_args passes -D{name}, which the project does not define")
    if f"-DHPC_BUILD_TRAINER={trainer}" not in args:
        failures.append(f"{sorted(variant_set)}: HPC_BUILD_TRAINER is not {trainer}: {args}")

if failures:
    sys.exit("FAIL: " + "\nFAIL: ".join(failures))
print(f"{recipe.relative_to(source)}: variants {sorted(variants)}; depends_on "
      f"{', '.join(sorted(deps))}; find_package {', '.join(sorted(found))} covered; "
      f"cmake_args defined by the project")
print("NOT RUN: spack spec / spack install (Spack cannot be fetched on this machine)")
