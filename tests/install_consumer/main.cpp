// Traces a TorchScript file with the installed qfx and prints the node count.
#include <iostream>

#include "qfx/fx/tracer.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto gm = qfx::fx::trace_file(argv[1]);
  std::cout << "nodes: " << gm->graph().size() << "\n";
  return gm->graph().size() > 3 ? 0 : 1;
}
