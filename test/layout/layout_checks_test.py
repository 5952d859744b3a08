"""The layout checks themselves: each must flag what it exists to catch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import check_includes  # noqa: E402
import check_link_graph  # noqa: E402

ARCH = """
## Rooms and the direction of dependencies
| room | what it owns | may include | never |
|---|---|---|---|
| `proto` | schema | | |
| `daemon/common` | clock | `proto` | |
| `daemon/core` | sessions | `daemon/common`, `proto` | `grpcpp/`, `sys/socket.h` | `daemon/rpc` |
| `daemon/rpc` | gRPC | `daemon/core`, `daemon/common`, `proto` | | |
## Next
"""


class IncludeCheckTest(unittest.TestCase):
    def setUp(self):
        self.rules = check_includes.parse_rules(ARCH)

    def problems(self, path, text):
        return list(check_includes.check_file(self.rules, path, text, "/nonexistent"))

    def test_reads_the_table(self):
        self.assertEqual(set(self.rules.rooms), {"proto", "daemon/common", "daemon/core", "daemon/rpc"})

    def test_include_down_the_direction_is_allowed(self):
        self.assertEqual(self.problems("daemon/rpc/a.cc", '#include "daemon/core/x.h"\n'), [])
        self.assertEqual(self.problems("daemon/core/a.cc", '#include "gpuctl/v1/ipc.pb.h"\n'), [])
        self.assertEqual(self.problems("daemon/core/a.cc", '#include "absl/status/status.h"\n'), [])

    def test_include_against_the_direction_is_flagged(self):
        found = self.problems("daemon/core/a.cc", 'int x;\n#include "daemon/rpc/grpc_service.h"\n')
        self.assertEqual(len(found), 1)
        self.assertIn("daemon/core/a.cc:2", found[0])
        self.assertIn("from daemon/rpc", found[0])

    def test_forbidden_third_party_header_is_flagged(self):
        found = self.problems("daemon/core/a.cc", '#include "grpcpp/grpcpp.h"\n')
        self.assertEqual(len(found), 1)
        self.assertIn("must never include", found[0])

    def test_system_header_in_never_is_flagged(self):
        found = self.problems("daemon/core/a.cc", "#include <sys/socket.h>\n")
        self.assertEqual(len(found), 1)

    def test_test_code_may_use_its_extra_rooms_and_ignores_never(self):
        text = '#include "daemon/rpc/grpc_service.h"\n#include "grpcpp/grpcpp.h"\n'
        self.assertEqual(self.problems("daemon/core/a_test.cc", text), [])
        self.assertEqual(self.problems("daemon/core/testing/fake.h", text), [])
        self.assertEqual(len(self.problems("daemon/core/a.cc", text)), 2)

    def test_unknown_room_in_table_is_an_error(self):
        with self.assertRaises(ValueError):
            check_includes.parse_rules(ARCH.replace("`daemon/common`, `proto` |", "`daemon/nowhere` |"))


DOT = """digraph "g" {
"node0" [ label = "gpuctl_daemon_core", shape = octagon ];
"node1" [ label = "gpuctl_proto_messages", shape = octagon ];
"node2" [ label = "protobuf::libprotobuf", shape = octagon ];
"node3" [ label = "gRPC::grpc++", shape = octagon ];
"node4" [ label = "gpuctl_convert", shape = octagon ];
"node5" [ label = "gpuctl_store", shape = octagon ];
"node6" [ label = "libgpuctl", shape = doubleoctagon ];
"node7" [ label = "gpuctl_wire", shape = octagon ];
"node8" [ label = "ipc_codegen", shape = egg ];
"node9" [ label = "gpuctl_scheduler", shape = octagon ];
"node10" [ label = "gpuctl_analysis", shape = octagon ];
"node11" [ label = "gpuctl_hostctx", shape = octagon ];
"node12" [ label = "gpuctl_merge", shape = octagon ];
"node6" -> "node7";
"node7" -> "node8";
"node8" -> "node2" [ style = dotted ];
"node0" -> "node1";
"node1" -> "node2";
"node0" -> "node4";
"node0" -> "node5";
"node9" -> "node0";
"node0" -> "node10";
"node11" -> "node4";
"node12" -> "node10";
}
"""


class LinkGraphCheckTest(unittest.TestCase):
    def test_clean_graph_passes(self):
        nodes, graph = check_link_graph.parse_dot(DOT)
        self.assertEqual(check_link_graph.violations(nodes, graph), [])

    def test_core_reaching_grpc_through_a_dependency_is_flagged(self):
        dot = DOT.replace("}\n", '"node5" -> "node3";\n}\n')
        nodes, graph = check_link_graph.parse_dot(dot)
        found = check_link_graph.violations(nodes, graph)
        self.assertTrue(any("gpuctl_daemon_core reaches gRPC::grpc++: gpuctl_daemon_core -> gpuctl_store"
                            in p for p in found), found)

    def test_hostctx_reaching_the_core_is_flagged(self):
        dot = DOT.replace("}\n", '"node11" -> "node0";\n}\n')
        nodes, graph = check_link_graph.parse_dot(dot)
        found = check_link_graph.violations(nodes, graph)
        self.assertTrue(any("gpuctl_hostctx reaches gpuctl_daemon_core" in p for p in found), found)

    def test_analysis_reaching_grpc_is_flagged(self):
        dot = DOT.replace("}\n", '"node10" -> "node3";\n}\n')
        nodes, graph = check_link_graph.parse_dot(dot)
        found = check_link_graph.violations(nodes, graph)
        self.assertTrue(any(p.startswith("gpuctl_analysis reaches gRPC::grpc++") for p in found),
                        found)

    def test_merge_reaching_grpc_is_flagged(self):
        dot = DOT.replace("}\n", '"node12" -> "node3";\n}\n')
        nodes, graph = check_link_graph.parse_dot(dot)
        found = check_link_graph.violations(nodes, graph)
        self.assertTrue(any(p.startswith("gpuctl_merge reaches gRPC::grpc++") for p in found),
                        found)

    def test_a_generator_the_build_runs_is_not_linked(self):
        nodes, graph = check_link_graph.parse_dot(DOT)
        self.assertNotIn("protobuf::libprotobuf", check_link_graph.reachable(graph, "libgpuctl"))

    def test_library_linking_protobuf_is_flagged(self):
        dot = DOT.replace("}\n", '"node6" -> "node2";\n}\n')
        nodes, graph = check_link_graph.parse_dot(dot)
        self.assertTrue(any(p.startswith("libgpuctl reaches protobuf::") for p in
                            check_link_graph.violations(nodes, graph)))

    def test_missing_target_is_flagged(self):
        nodes, graph = check_link_graph.parse_dot(DOT.replace("gpuctl_store", "gpuctl_storage"))
        self.assertTrue(any("gpuctl_store: not in the dependency graph" in p for p in
                            check_link_graph.violations(nodes, graph)))


if __name__ == "__main__":
    unittest.main()
