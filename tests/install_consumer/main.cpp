// A user's program against the installed qfx: traces a TorchScript file and prints
// the node count; with a second argument, resolves that backend by name (found in
// the installed <prefix>/share/qfx/configs) and prints its name.
#include <iostream>

#include <qfx/qfx.h>  // the umbrella header: every public header compiles from the installed prefix

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto gm = qfx::fx::trace_file(argv[1]);
  std::cout << "nodes: " << gm->graph().size() << "\n";
  if (argc > 2) std::cout << "backend: " << qfx::quant::BackendConfig::resolve(argv[2]).name << "\n";
  return gm->graph().size() > 3 ? 0 : 1;
}
