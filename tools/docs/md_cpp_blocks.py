#!/usr/bin/env python3
"""Writes the ```cpp blocks of a Markdown file, in order, as one C++ source.

    md_cpp_blocks.py GUIDE.md OUT.cpp

Each block is preceded by a #line directive, so compiler errors name the Markdown
file and line. OUT.cpp is rewritten only when the code changed (prose edits do not
rebuild the program). Exit status 1 for an unclosed block or a file without one.
"""
import os
import sys


def main():
    src, dst = sys.argv[1], sys.argv[2]
    out = [f"// Generated from {os.path.basename(src)} by md_cpp_blocks.py: edit the Markdown file.\n"]
    block_start = None
    blocks = 0
    with open(src, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            fence = line.strip()
            if block_start is None and fence == "```cpp":
                block_start = n
                blocks += 1
                out.append(f'#line {n + 1} "{src}"\n')
            elif block_start is not None and fence == "```":
                block_start = None
            elif block_start is not None:
                out.append(line)
    if block_start is not None:
        sys.exit(f"{src}:{block_start}: a ```cpp block is not closed")
    if blocks == 0:
        sys.exit(f"{src}: no ```cpp block")
    text = "".join(out)
    if os.path.exists(dst) and open(dst, encoding="utf-8").read() == text:
        return
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
