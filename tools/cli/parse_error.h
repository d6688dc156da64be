// Command-line parse errors as a user reads them.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

namespace qfx::cli {

/// Reports a CLI11 parse error and returns its exit code (105, 106 or 109; see
/// docs/bad_input.md). When the first argument names no command (`qfx frobnicate`),
/// the message says so and lists the commands, instead of CLI11's "A subcommand is
/// required"; otherwise CLI11's own message.
inline int report_parse_error(CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  if (argc > 1 && argv[1][0] != '-') {
    const std::string given = argv[1];
    std::string names;
    bool known = false;
    for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || s->get_name() == given;
      names += (names.empty() ? "" : ", ") + s->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "qfx: error: unknown command '%s' (commands: %s; qfx --help)\n", given.c_str(), names.c_str());
      return e.get_exit_code();
    }
  }
  return app.exit(e);
}

}  // namespace qfx::cli
