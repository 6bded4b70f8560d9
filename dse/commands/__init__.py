"""One module per dse subcommand; each exposes run(args) -> exit code."""
