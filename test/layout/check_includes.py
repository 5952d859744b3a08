#!/usr/bin/env python3
"""Fails on an #include that goes against the direction of dependencies.

The rooms and what each may include are read from the table in
docs/architecture.md (section "Rooms and the direction of dependencies"),
so the document and the check cannot drift apart. A file belongs to the
longest room prefix that contains it; an include of a repo path belongs to
the room of that path. Includes of the room itself are always allowed;
anything outside the listed rooms (abseil, gRPC, gtest, generated
gpuctl/v1/*.pb.h resolved to proto/) is allowed unless the table says a
room may not have it ("never: ...").

    check_includes.py [--root DIR]          check the tree, exit 1 on violations
"""
import argparse
import fnmatch
import os
import re
import sys

TABLE_HEADING = "## Rooms and the direction of dependencies"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.M)
SOURCE_EXT = (".h", ".cc", ".cpp", ".hpp")
SCANNED_TOPS = ("daemon", "cli", "client_lib", "proto")
# Test code: the tests, fuzz targets and test support of a room. It may also
# use the rooms of the table's last column, and the "never" column does not
# bind it (the library's codec is checked against libprotobuf, for one).
TEST_CODE = ("*_test.cc", "*_test_util.h", "*_for_test.*", "*_fuzz_target.cc", "*/testing/*",
             "*/fuzz/*", "*/wire_compat_support.*")


def is_test_code(path):
    return any(fnmatch.fnmatch(path, pattern) for pattern in TEST_CODE)


class Rules:
    def __init__(self, rooms):
        # rooms: {room: (allowed, never, allowed in tests)}
        self.rooms = rooms

    def room_of(self, path):
        best = None
        for room in self.rooms:
            if path == room or path.startswith(room + "/"):
                if best is None or len(room) > len(best):
                    best = room
        return best


def parse_rules(markdown):
    """Reads the `| room | what it owns | may include | never |` table under
    TABLE_HEADING."""
    start = markdown.find(TABLE_HEADING)
    if start < 0:
        raise ValueError(f"docs/architecture.md has no '{TABLE_HEADING}' section")
    rooms = {}
    for line in markdown[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        room = cells[0].strip("`")
        allowed = set(re.findall(r"`([^`]+)`", cells[2]))
        never = set(re.findall(r"`([^`]+)`", cells[3])) if len(cells) > 3 else set()
        in_tests = set(re.findall(r"`([^`]+)`", cells[4])) if len(cells) > 4 else set()
        rooms[room] = (allowed, never, in_tests)
    if not rooms:
        raise ValueError(f"no rooms in the table under '{TABLE_HEADING}'")
    for room, (allowed, _, in_tests) in rooms.items():
        unknown = (allowed | in_tests) - set(rooms)
        if unknown:
            raise ValueError(f"room {room} may include unknown rooms {sorted(unknown)}")
    return Rules(rooms)


def resolve(include, root):
    """The repo path an include names, or None for a third-party header."""
    if include.startswith("gpuctl/v1/"):
        return "proto/" + include
    if include.startswith("gpuctl/") and os.path.exists(os.path.join(root, "client_lib/include", include)):
        return "client_lib/include/" + include
    top = include.split("/", 1)[0]
    if top in SCANNED_TOPS:
        return include
    return None


def check_file(rules, path, text, root):
    """Yields a message for each include of `text` (a file at repo path
    `path`) that its room may not have."""
    room = rules.room_of(path)
    if room is None:
        return
    allowed, never, in_tests = rules.rooms[room]
    test_code = is_test_code(path)
    if test_code:
        allowed = allowed | in_tests
    for m in INCLUDE_RE.finditer(text):
        include = m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        for pattern in () if test_code else never:
            if include.startswith(pattern) or fnmatch.fnmatch(include, pattern):
                yield f"{path}:{line}: {room} must never include {include} ({pattern})"
        target = resolve(include, root)
        if target is None:
            continue
        target_room = rules.room_of(target)
        if target_room is None or target_room == room or target_room in allowed:
            continue
        yield (f"{path}:{line}: {room} includes {include} from {target_room}, "
               f"against the direction in docs/architecture.md")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    with open(os.path.join(root, "docs/architecture.md"), encoding="utf-8") as f:
        rules = parse_rules(f.read())
    problems = []
    checked = 0
    for top in SCANNED_TOPS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                with open(full, encoding="utf-8", errors="replace") as f:
                    problems.extend(check_file(rules, rel, f.read(), root))
                checked += 1
    for p in problems:
        print(p)
    print(f"check_includes: {checked} files, {len(rules.rooms)} rooms, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
