#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Stack frames of an object file's functions, against a limit.

    frames.py OBJ LIMIT

Reads `objdump -d OBJ` and takes each function's stack frame from the
`sub $N,%rsp` of its prologue (x86-64). The kernel's C compiler warns about
frames over CONFIG_FRAME_WARN; rustc has no such warning, and a kernel stack
is 16 KiB. Prints one TAP line per function over LIMIT bytes and one for the
largest frame; exits 1 if any frame is over LIMIT or if no frame was read at
all (a missing or empty object proves nothing).
"""

import re
import subprocess
import sys


def frames(obj):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], check=True,
                         capture_output=True, text=True).stdout
    fn, sizes = None, {}
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"\bsub\s+\$0x([0-9a-f]+),%rsp", line)
        if m and fn:
            sizes[fn] = max(sizes.get(fn, 0), int(m.group(1), 16))
    return sizes


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    obj, limit = sys.argv[1], int(sys.argv[2])
    try:
        sizes = frames(obj)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"not ok - objdump of {obj}: {e}")
        return 1
    if not sizes:
        print(f"not ok - no stack frame read from {obj}")
        return 1
    over = sorted(((n, f) for f, n in sizes.items() if n > limit), reverse=True)
    for n, f in over:
        print(f"not ok - {f[:100]}: a stack frame of {n} bytes, over {limit}")
    n, f = max((n, f) for f, n in sizes.items())
    print(f"{'not ok' if over else 'ok'} - largest stack frame of {len(sizes)} in {obj}: "
          f"{n} bytes ({f[:80]})")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
