"""Writes a C++ header of the TFLite flatbuffer schema's numbers, read at build time
from the builders that flatc generated from the schema and that LiteRT ships
(`ai_edge_litert.schema_py_generated`): every enum's values, and for every table its
field count, each field's vtable offset (flatbuffers: 4 + 2 * slot) and, for
scalars, its C++ type. qfx's TFLite
writer (backends/src/tflite/) builds the file with the FlatBuffers C++ library and
these numbers, so nothing of the schema is copied into the repository.

Usage: schema_header.py OUT.h
"""
import inspect
import re
import sys

SLOT = re.compile(r"builder\.Prepend(\w+?)Slot\((\d+),")
START = re.compile(r"builder\.StartObject\((\d+)\)")
CTYPES = {"Bool": "bool", "Int8": "int8_t", "Uint8": "uint8_t", "Int16": "int16_t", "Uint16": "uint16_t",
          "Int32": "int32_t", "Uint32": "uint32_t", "Int64": "int64_t", "Uint64": "uint64_t", "Float32": "float",
          "Float64": "double"}


def enums(mod):
    """Classes whose public attributes are all ints (flatc's Python enums)."""
    out = {}
    for name, cls in vars(mod).items():
        if not inspect.isclass(cls) or cls.__module__ != mod.__name__:
            continue
        items = {k: v for k, v in vars(cls).items() if not k.startswith("_")}
        if items and all(isinstance(v, int) and not isinstance(v, bool) for v in items.values()):
            out[name] = items
    return out


def tables(mod):
    """{table: (field count, {field: slot})} from `<T>Start` and `<T>Add<F>` builders."""
    out = {}
    funcs = {n: f for n, f in vars(mod).items() if inspect.isfunction(f)}
    for name, f in funcs.items():
        if name.endswith("Start") and name[:-5]:
            m = START.search(inspect.getsource(f))
            if m:
                out[name[:-5]] = (int(m.group(1)), {})
    names = sorted(out, key=len, reverse=True)
    for name, f in funcs.items():
        table = next((t for t in names if name.startswith(t + "Add")), None)
        if table is None:
            continue
        m = SLOT.search(inspect.getsource(f))
        if m:
            out[table][1][name[len(table) + 3:]] = (int(m.group(2)), CTYPES.get(m.group(1)))
    return out


def main():
    from ai_edge_litert import schema_py_generated as mod

    lines = ["// Generated at build time by tools/tflite/schema_header.py from",
             "// ai_edge_litert.schema_py_generated (flatc's builders for the TFLite schema).",
             "#pragma once", "#include <cstdint>", "", "namespace qfx::tflite_schema {", ""]
    for name, items in sorted(enums(mod).items()):
        lines.append(f"namespace {name} {{")
        lines += [f"inline constexpr int64_t {k} = {v};" for k, v in sorted(items.items(), key=lambda kv: kv[1])]
        lines.append(f"}}  // namespace {name}")
    for name, (count, fields) in sorted(tables(mod).items()):
        lines.append(f"namespace {name}T {{")
        lines.append(f"inline constexpr int kFieldCount = {count};")
        for k, (s, ctype) in sorted(fields.items(), key=lambda kv: kv[1][0]):
            lines.append(f"inline constexpr uint16_t k{k} = {4 + 2 * s};")
            if ctype:
                lines.append(f"using t{k} = {ctype};")
        lines.append(f"}}  // namespace {name}T")
    lines += ["", "}  // namespace qfx::tflite_schema", ""]
    text = "\n".join(lines)
    with open(sys.argv[1], "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
